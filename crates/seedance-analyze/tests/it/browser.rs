//! The HTML report in a real browser: headless Chromium loads the `--format html` report of
//! the fixtures, runs its script and dumps the DOM it built; every chart must be there as an
//! SVG with the number of bars the JSON report calls for, every table with its rows, and the
//! browser's log must hold no console message (the report logs nothing, so any is an error,
//! such as an uncaught exception). A copy of a report with a broken script checks that this
//! log check sees errors at all.
//!
//! Without Chromium on `PATH` the test says `skipped: chromium not found` on stderr and
//! passes, unless `SEEDANCE_REQUIRE_CHROMIUM=1`, when it fails, saying to install it (Debian
//! package `chromium`; `.ci/run` installs it and sets the variable). It takes a few seconds
//! (the pages load in parallel).
//!
//! `html_report_layout_in_chromium` loads the reports again at 900 and 1400 px with a
//! script that measures the laid-out page ([`LAYOUT_PROBE`]): nothing sticks out of its card
//! (wide tables scroll inside theirs), no identifier that fits is split across lines,
//! Processes rows are one line, and the counts and plurals are the JSON report's.

use super::run;
use serde_json::Value;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Longest a page may take to load and dump.
const TIMEOUT: Duration = Duration::from_secs(120);

/// The browser on `PATH`, or `None` after saying the test is skipped (written straight to
/// stderr, past libtest's capture, so a plain `cargo test` shows it); with
/// `SEEDANCE_REQUIRE_CHROMIUM=1` a missing browser is a failure instead.
fn chromium() -> Option<PathBuf> {
    let candidates = ["chromium", "chromium-browser", "google-chrome"];
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        for c in candidates {
            let p = dir.join(c);
            if p.is_file() {
                return Some(p);
            }
        }
    }
    let required = std::env::var("SEEDANCE_REQUIRE_CHROMIUM").is_ok_and(|v| v == "1");
    assert!(
        !required,
        "headless Chromium is needed to check the HTML report in a browser and was not found \
         on PATH (tried {candidates:?}), and SEEDANCE_REQUIRE_CHROMIUM=1 says this test must \
         run: install it (Debian/Ubuntu: apt-get install -y chromium); CI installs it in .ci/run"
    );
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr(),
        "browser::html_report_renders_in_chromium: skipped: chromium not found on PATH (tried \
         {candidates:?}; set SEEDANCE_REQUIRE_CHROMIUM=1 to make that a failure)"
    );
    None
}

/// What the browser made of one page.
struct Page {
    /// The DOM after the page's scripts ran (`--dump-dom`).
    dom: String,
    /// The browser's log (`--enable-logging=stderr --v=0`), console messages included.
    log: String,
}

/// Loads `html` in headless Chromium with a fresh profile under `profile`.
fn load(browser: &Path, html: &Path, profile: &Path) -> Page {
    load_at(browser, html, profile, None)
}

/// [`load`] in a window `width` CSS pixels wide (Chromium's default without).
fn load_at(browser: &Path, html: &Path, profile: &Path, width: Option<u32>) -> Page {
    let mut child = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(width.map(|w| format!("--window-size={w},1200")))
        .arg("--dump-dom")
        .arg(format!("file://{}", html.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", browser.display()));
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "chromium did not finish {} within {TIMEOUT:?}",
                html.display()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let dom = reader.join().unwrap();
    let log = err_reader.join().unwrap();
    assert!(
        status.success(),
        "chromium failed on {}: {status}\n{log}",
        html.display()
    );
    Page { dom, log }
}

/// Lines of the browser's log that are console messages or uncaught exceptions.
fn console_errors(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|l| l.contains(":CONSOLE") || l.contains("Uncaught"))
        .collect()
}

/// The content of the element that starts with `open` (up to its `close`).
fn element<'a>(dom: &'a str, open: &str, close: &str) -> &'a str {
    let start = dom
        .find(open)
        .unwrap_or_else(|| panic!("{open} not in the DOM"));
    let rest = &dom[start..];
    let end = rest
        .find(close)
        .unwrap_or_else(|| panic!("{open} not closed"));
    &rest[..end]
}

/// The SVG chart labelled `label`.
fn chart<'a>(dom: &'a str, label: &str) -> &'a str {
    let at = dom
        .find(&format!("aria-label=\"{label}\""))
        .unwrap_or_else(|| panic!("no chart {label:?} in the DOM"));
    let start = dom[..at].rfind("<svg").unwrap();
    element(&dom[start..], "<svg", "</svg>")
}

fn section<'a>(dom: &'a str, id: &str) -> &'a str {
    element(dom, &format!("<section id=\"{id}\">"), "</section>")
}

fn rows(s: &str) -> usize {
    let body = element(s, "<tbody>", "</tbody>");
    body.matches("<tr>").count()
}

/// Checks the DOM of the report of `fixture` against its JSON report.
fn check_report(fixture: &str, page: &Page, r: &Value) {
    let errors = console_errors(&page.log);
    assert!(
        errors.is_empty(),
        "{fixture}: the browser logged errors:\n{}",
        errors.join("\n")
    );
    let dom = &page.dom;
    assert!(
        dom.contains("<title>seedance-analyze report</title>"),
        "{fixture}: not the report:\n{dom}"
    );
    let len = |v: &Value| v.as_array().unwrap().len();

    // Errors over time: one bar per result in each display slot (at most six results: no
    // result is "other"). The slots are the report's buckets, widened by doubling until the
    // run (first to last record) fits in 600 of them, as render_html.rs draws them.
    let buckets = r["errors_over_time"]["buckets"].as_array().unwrap();
    let results: std::collections::BTreeSet<&str> = buckets
        .iter()
        .flat_map(|b| {
            b["by_result"]
                .as_object()
                .unwrap()
                .keys()
                .map(|k| k.as_str())
        })
        .collect();
    assert!(
        results.len() <= 6 && !buckets.is_empty(),
        "{fixture}: fixture too big for this test"
    );
    let u = |v: &Value| v.as_u64().unwrap();
    let first = u(&buckets[0]["start_ns"]).min(u(&r["overview"]["first_ts_ns"]));
    let last = u(&buckets[buckets.len() - 1]["start_ns"]).max(u(&r["overview"]["last_ts_ns"]));
    let mut width = u(&r["errors_over_time"]["bucket_ns"]);
    while (last - first) / width + 1 > 600 {
        width *= 2;
    }
    let base = first - first % width;
    let slots: std::collections::BTreeSet<(u64, &str)> = buckets
        .iter()
        .flat_map(|b| {
            let slot = (u(&b["start_ns"]) - base) / width;
            b["by_result"]
                .as_object()
                .unwrap()
                .keys()
                .map(move |k| (slot, k.as_str()))
        })
        .collect();
    let bars = slots.len();
    let c = chart(dom, "errors over time");
    // Integer value ticks, increasing, from 0; the plot's bars are narrower than the plot.
    let ticks: Vec<u64> = c
        .split("text-anchor=\"end\">")
        .skip(1)
        .filter_map(|t| t.split('<').next())
        .filter(|t| !t.starts_with('+'))
        .map(|t| {
            t.replace(',', "")
                .parse()
                .unwrap_or_else(|_| panic!("{fixture}: tick {t:?} is not an integer"))
        })
        .collect();
    assert_eq!(ticks.first(), Some(&0), "{fixture}: ticks {ticks:?}");
    assert!(
        ticks.windows(2).all(|w| w[0] < w[1]) && ticks.len() >= 2,
        "{fixture}: ticks {ticks:?}"
    );
    let widest = c
        .split("<rect ")
        .skip(1)
        .map(|rect| {
            let w = rect.split("width=\"").nth(1).unwrap();
            w.split('"').next().unwrap().parse::<f64>().unwrap()
        })
        .fold(0.0, f64::max);
    assert!(
        widest < 894.0 / 2.0,
        "{fixture}: a bar {widest} wide fills the plot"
    );
    assert_eq!(
        c.matches("<rect").count(),
        bars,
        "{fixture}: errors over time"
    );
    for res in &results {
        assert!(c.contains(res), "{fixture}: {res} not in the errors chart");
    }

    // Calls per function: a calls bar and an errors bar per function.
    let functions = r["functions"].as_array().unwrap();
    let c = chart(dom, "calls per function");
    assert_eq!(
        c.matches("<rect").count(),
        2 * functions.len().min(30),
        "{fixture}: calls per function"
    );
    for f in functions {
        assert!(
            c.contains(f["function"].as_str().unwrap()),
            "{fixture}: {f} not charted"
        );
    }

    // Process timeline: one bar per process.
    let c = chart(dom, "process timeline");
    assert_eq!(
        c.matches("<rect").count(),
        len(&r["processes"]).min(100),
        "{fixture}: timeline"
    );
    assert_eq!(dom.matches("<svg").count(), 3, "{fixture}: three charts");

    // Tables and lists.
    assert_eq!(
        rows(section(dom, "processes")),
        len(&r["processes"]),
        "{fixture}: processes"
    );
    assert_eq!(
        rows(section(dom, "functions")),
        functions.len(),
        "{fixture}: functions"
    );
    assert_eq!(
        section(dom, "session-topology")
            .matches("<tr><td><code>")
            .count(),
        len(&r["devices"]),
        "{fixture}: devices"
    );
    assert_eq!(
        section(dom, "problems")
            .matches("<div class=\"problem ")
            .count(),
        len(&r["problems"]),
        "{fixture}: problems"
    );
    let faults = r["problems"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["kind"] == "launch_fault" || p["kind"] == "alloc_fault")
        .count();
    let s = section(dom, "launch-and-allocation-faults");
    if faults == 0 {
        assert!(s.contains("No launch or allocation faults."), "{fixture}");
    } else {
        assert_eq!(rows(s), faults, "{fixture}: faults table");
    }
    // Counts read in words as the text report writes them: no "1 hosts", "1 errors".
    let header = element(dom, "<header>", "</header>");
    for bad in [
        "1 processes",
        "1 hosts",
        "1 devices",
        "1 functions",
        "1 calls",
        "1 errors",
    ] {
        assert!(
            !header.contains(&format!(">{bad} ")) && !header.contains(&format!(" {bad} ")),
            "{fixture}: {bad:?} in {header}"
        );
    }
    let o = &r["overview"];
    let word = |n: u64, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    assert!(
        header.contains(&format!(
            "{} on {}",
            word(u(&o["processes"]), "process", "processes"),
            word(u(&o["hosts"]), "host", "hosts")
        )),
        "{fixture}: {header}"
    );
    assert!(
        header.contains(", first to last record of all traces)"),
        "{fixture}: the span says what it is: {header}"
    );
    let rp = &r["repairs"];
    if u(&rp["calls_repaired"]) > 0 {
        let want = format!(
            "{} repaired in {} by the fix mode.",
            word(u(&rp["calls_repaired"]), "call", "calls"),
            word(u(&rp["processes"]), "process", "processes")
        );
        assert!(section(dom, "repairs").contains(&want), "{fixture}: {want}");
    }
    // The footnote on unknown call counts only when a process had no exit summary.
    assert_eq!(
        section(dom, "functions").contains("some processes had no exit summary"),
        u(&o["processes_without_exit_summary"]) > 0,
        "{fixture}: footnote"
    );

    // The sorting script ran without error and left the tables sortable.
    assert!(dom.contains("<table class=\"sortable\""), "{fixture}");
}

#[test]
fn html_report_renders_in_chromium() {
    let started = Instant::now();
    let Some(browser) = chromium() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // `fix`: one process, one host, one repaired call, a run of milliseconds.
    let fixtures = ["fleet", "v2", "v3", "fix"];
    let mut jobs: Vec<(String, PathBuf)> = Vec::new();
    let mut reports: Vec<Value> = Vec::new();
    for f in fixtures {
        let html = dir.path().join(format!("{f}.html"));
        let path = format!("tests/fixtures/{f}");
        let (code, _, err) = run(&[
            "summary",
            "--format",
            "html",
            "-o",
            html.to_str().unwrap(),
            &path,
        ]);
        assert_eq!(code, 0, "{err}");
        let (code, json, err) = run(&["summary", "--format", "json", &path]);
        assert_eq!(code, 0, "{err}");
        reports.push(serde_json::from_str(&json).unwrap());
        jobs.push((f.to_string(), html));
    }
    // The control: the fleet report with a script that throws.
    let broken = dir.path().join("broken.html");
    let text = std::fs::read_to_string(&jobs[0].1).unwrap();
    std::fs::write(
        &broken,
        text.replace(
            "</body>",
            "<script>seedanceNoSuchFunction();</script></body>",
        ),
    )
    .unwrap();
    jobs.push(("broken".to_string(), broken));

    let pages: Vec<Page> = std::thread::scope(|s| {
        let handles: Vec<_> = jobs
            .iter()
            .map(|(name, html)| {
                let profile = dir.path().join(format!("profile-{name}"));
                let browser = &browser;
                s.spawn(move || load(browser, html, &profile))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for ((f, r), page) in fixtures.iter().zip(&reports).zip(&pages) {
        check_report(f, page, r);
    }
    let control = console_errors(&pages[fixtures.len()].log);
    assert!(
        control
            .iter()
            .any(|l| l.contains("Uncaught") && l.contains("seedanceNoSuchFunction")),
        "the browser log shows no uncaught exception for the broken page, so the check above \
         proves nothing:\n{}",
        pages[fixtures.len()].log
    );
    eprintln!(
        "chromium: {} pages in {:.1} s",
        jobs.len(),
        started.elapsed().as_secs_f64()
    );
}

/// Measures the laid-out page and writes what it found into the DOM, for `--dump-dom`:
/// elements that stick out of their card (section) other than inside a `.scroll` wrapper,
/// cards wider than themselves, identifiers (`code` without blanks) drawn on more than one
/// line although they fit their box on one, Processes rows taller than 40 px (one line), and the
/// page's text.
const LAYOUT_PROBE: &str = r#"<script>(function(){
var out={overflow:[],split:[],tall:[],text:document.body.textContent};
document.querySelectorAll('section').forEach(function(s){
  if(s.scrollWidth>s.clientWidth+1)out.overflow.push(s.id+': card '+s.scrollWidth+' > '+s.clientWidth);
  var c=s.getBoundingClientRect();
  s.querySelectorAll('*').forEach(function(e){
    if(e.parentElement.closest('.scroll'))return;
    var r=e.getBoundingClientRect();
    if(r.width>0&&r.right>c.right+1)out.overflow.push(s.id+': '+e.tagName+' '+(e.textContent||'').slice(0,40)+' ends at '+Math.round(r.right)+' > '+Math.round(c.right));
  });
});
document.querySelectorAll('code').forEach(function(e){
  var t=e.textContent;if(/\s/.test(t)||e.getClientRects().length<2)return;
  var box=e.parentElement.getBoundingClientRect().width;
  e.style.whiteSpace='nowrap';var w=e.getBoundingClientRect().width;e.style.whiteSpace='';
  if(w<=box)out.split.push(t+' ('+e.getClientRects().length+' lines, '+Math.round(w)+' of '+Math.round(box)+' px)');
});
document.querySelectorAll('#processes tbody tr').forEach(function(tr){
  var h=tr.getBoundingClientRect().height;if(h>40)out.tall.push(Math.round(h)+' px: '+tr.textContent.slice(0,60));
});
var pre=document.createElement('pre');pre.id='layout-result';pre.textContent=JSON.stringify(out);document.body.appendChild(pre);
})();</script>"#;

/// The layout probe's findings from a dumped DOM.
fn layout_result(dom: &str) -> Value {
    let text = element(dom, "<pre id=\"layout-result\">", "</pre>");
    let text = text
        .trim_start_matches("<pre id=\"layout-result\">")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&nbsp;", "\u{a0}")
        .replace("&amp;", "&");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// `1,234`: counts as the reports write them.
fn count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `1 call`, `2 calls`, `1,234 calls`: the text report's rule.
fn counted(n: u64, one: &str, many: &str) -> String {
    format!("{} {}", count(n), if n == 1 { one } else { many })
}

/// The HTML report as people read it, in headless Chromium at 900 and 1400 px: no card
/// overflows (wide tables scroll inside their card), no identifier is split across lines,
/// Processes rows stay short, counts and plurals are those of the JSON report, the Input
/// table has no empty cell, time axes are scaled to the span, and a repaired lifetime fault
/// says what the program got.
#[test]
fn html_report_layout_in_chromium() {
    let Some(browser) = chromium() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let fixtures = ["fleet", "v2", "v3", "v4", "v5", "fix"];
    let mut jobs: Vec<(String, PathBuf, Option<u32>)> = Vec::new();
    let mut reports = std::collections::BTreeMap::new();
    let mut plain = std::collections::BTreeMap::new();
    for f in fixtures {
        let html = dir.path().join(format!("{f}.html"));
        let path = format!("tests/fixtures/{f}");
        let (code, _, err) = run(&[
            "summary",
            "--format",
            "html",
            "-o",
            html.to_str().unwrap(),
            &path,
        ]);
        assert_eq!(code, 0, "{err}");
        let text = std::fs::read_to_string(&html).unwrap();
        plain.insert(f, text.clone());
        std::fs::write(
            &html,
            text.replace("</body>", &format!("{LAYOUT_PROBE}</body>")),
        )
        .unwrap();
        let (_, json, _) = run(&["summary", "--format", "json", &path]);
        reports.insert(f, serde_json::from_str::<Value>(&json).unwrap());
        for w in [900, 1400] {
            jobs.push((f.to_string(), html.clone(), Some(w)));
        }
    }
    let pages: Vec<Page> = std::thread::scope(|s| {
        let handles: Vec<_> = jobs
            .iter()
            .map(|(name, html, w)| {
                let profile = dir.path().join(format!("profile-{name}-{}", w.unwrap()));
                let browser = &browser;
                s.spawn(move || load_at(browser, html, &profile, *w))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut failures: Vec<String> = Vec::new();
    for ((f, _, w), page) in jobs.iter().zip(&pages) {
        let w = w.unwrap();
        let l = layout_result(&page.dom);
        for (what, list) in [
            ("overflows its card", &l["overflow"]),
            ("identifier split across lines", &l["split"]),
            ("Processes row taller than 40 px", &l["tall"]),
        ] {
            for item in list.as_array().unwrap() {
                failures.push(format!("{f} at {w} px: {what}: {item}"));
            }
        }
        let text = l["text"].as_str().unwrap();
        for noun in [
            "calls",
            "errors",
            "processes",
            "hosts",
            "devices",
            "functions",
            "records",
        ] {
            for pre in [" ", ">", "(", "\u{a0}"] {
                let bad = format!("{pre}1 {noun}");
                if text.contains(&bad) {
                    failures.push(format!("{f}: \"{}\" in the page", bad.trim_start()));
                }
            }
        }
        let r = &reports[f.as_str()];
        let o = &r["overview"];
        let n = |v: &Value| v.as_u64().unwrap();
        for (k, one, many) in [
            ("processes", "process", "processes"),
            ("calls", "call", "calls"),
            ("errors", "error", "errors"),
        ] {
            let want = counted(n(&o[k]), one, many);
            if !text.contains(&want) {
                failures.push(format!("{f}: the header lacks {want:?}"));
            }
        }
        for func in r["functions"].as_array().unwrap().iter().take(30) {
            let plus = if n(&func["processes_without_exit_summary"]) > 0 {
                "+"
            } else {
                ""
            };
            let calls = n(&func["calls"]);
            let want = format!(
                "{}{plus} {}, {}",
                count(calls),
                if calls == 1 { "call" } else { "calls" },
                counted(n(&func["errors"]), "error", "errors")
            );
            if !text.contains(&want) {
                failures.push(format!("{f}: calls chart lacks {want:?}"));
            }
        }
    }
    for (f, html) in &plain {
        let input = section(html, "input");
        if input.contains("<td></td>") {
            failures.push(format!("{f}: an empty cell in the Input table"));
        }
        if html.contains("(not called)") {
            failures.push(format!("{f}: \"(not called)\""));
        }
        // Short runs: the axes end at the span, in milliseconds.
        let r = &reports[f];
        let o = &r["overview"];
        let (first, last) = (
            o["first_ts_ns"].as_u64().unwrap(),
            o["last_ts_ns"].as_u64().unwrap(),
        );
        if last - first < 1_000_000_000
            && !r["errors_over_time"]["buckets"]
                .as_array()
                .unwrap()
                .is_empty()
        {
            let c = chart(html, "errors over time");
            let want = format!(">+{} ms</text>", (last - first) / 1_000_000);
            if !c.contains(&want) {
                failures.push(format!("{f}: the errors chart does not end at {want}"));
            }
            let widest = c
                .split("<rect ")
                .skip(1)
                .map(|rect| {
                    let w = rect.split("width=\"").nth(1).unwrap();
                    w.split('"').next().unwrap().parse::<f64>().unwrap()
                })
                .fold(0.0, f64::max);
            if widest > 894.0 / 20.0 {
                failures.push(format!(
                    "{f}: a bar {widest} wide for a run of {} ns",
                    last - first
                ));
            }
        }
        let procs = r["processes"].as_array().unwrap();
        let t0 = procs
            .iter()
            .map(|p| p["start_ts_ns"].as_u64().unwrap())
            .min()
            .unwrap();
        let t1 = procs
            .iter()
            .map(|p| {
                (p["start_ts_ns"].as_u64().unwrap() + p["duration_ns"].as_u64().unwrap())
                    .max(p["end_ts_ns"].as_u64().unwrap())
            })
            .max()
            .unwrap()
            .max(t0 + 1);
        if t1 - t0 < 1_000_000_000 {
            let c = chart(html, "process timeline");
            let want = format!(">+{} ms</text>", (t1 - t0) / 1_000_000);
            if !c.contains(&want) {
                failures.push(format!("{f}: the process timeline does not end at {want}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
