//! `seedance-analyze`: the command line over the `seedance_analyze` library. It only parses
//! arguments, shows progress and writes what the library renders.
//!
//! Exit codes: 0 success; 1 `explain` of a number the CUresult table lacks; 2 bad usage,
//! a path that does not exist, or an `explain` argument that is neither a number nor a
//! known name; 3 ([`gate::EXIT_NO_TRACE`]) no trace file in the input of `summary`, `export`
//! or either side of `diff` ("no trace found in ..." on stderr; the report is still
//! written); 4 ([`gate::EXIT_GATE`]) a `--fail-on` gate found what it gates on (one line on
//! stderr says what); 5 ([`gate::EXIT_PUSH`]) `export --otlp-endpoint` could not deliver
//! every request (one line on stderr says why).
#![forbid(unsafe_code)]

use anyhow::Context;
use clap::{Parser, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use seedance_analyze::gate::{self, FailOn};
use seedance_analyze::{
    diff, explain, export, push, render_html, render_json, render_text, Options, Report,
};
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

/// Inputs at least this large (bytes on disk) get a progress bar, on a terminal.
const PROGRESS_MIN_BYTES: u64 = 64 << 20;

#[derive(Parser)]
#[command(
    name = "seedance-analyze",
    version,
    about = "Turns seedance-fix traces from one process or a whole fleet into a diagnosis."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    /// Tables for the terminal.
    Text,
    /// The JSON report (documented in docs/analyzer.md).
    Json,
    /// One self-contained HTML page with charts.
    Html,
}

#[derive(Clone, Copy, ValueEnum)]
enum SimpleFormat {
    /// Text for the terminal.
    Text,
    /// JSON.
    Json,
}

/// `summary --fail-on`.
#[derive(Clone, Copy, ValueEnum)]
enum FailOnArg {
    /// Exit 4 when a problem of severity `error` is found.
    Error,
    /// Exit 4 when a problem of severity `error` or `warning` is found.
    Warning,
}

/// `diff --fail-on`.
#[derive(Clone, Copy, ValueEnum)]
enum DiffFailOn {
    /// Exit 4 when the second run has CUresults, faults or problems (error or warning) that
    /// the first lacks, or a problem of both runs at a higher severity (no longer repaired).
    New,
}

/// `export --format`.
#[derive(Clone, Copy, ValueEnum)]
enum ExportFormat {
    /// OTLP log records in the OTLP/JSON encoding: JSON lines, one `ExportLogsServiceRequest`
    /// per trace file (more for a file of over 1000 records).
    OtlpJson,
}

#[derive(Subcommand)]
enum Command {
    /// Summarize traces: processes, devices, functions, problems and what to do.
    Summary {
        /// Trace files or directories (walked recursively); plain or gzip JSON lines.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
        /// Write to this file instead of standard output.
        #[arg(long, short)]
        output: Option<PathBuf>,
        /// Exit 4 when problems of this severity or worse are found (for CI jobs).
        #[arg(long, value_enum)]
        fail_on: Option<FailOnArg>,
    },
    /// Write the traces' events in another format: OTLP/JSON log records for an
    /// OpenTelemetry Collector, as JSON lines of one ExportLogsServiceRequest per trace file
    /// (docs/analyzer.md, "OpenTelemetry").
    Export {
        /// Trace files or directories (walked recursively); plain or gzip JSON lines.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Output format.
        #[arg(long, value_enum, default_value_t = ExportFormat::OtlpJson)]
        format: ExportFormat,
        /// Write to this file instead of standard output (with --otlp-endpoint: as well).
        #[arg(long, short)]
        output: Option<PathBuf>,
        /// Send the log records to this OTLP/HTTP endpoint instead of writing them to
        /// standard output: http://collector:4318 (/v1/logs is added to a URL without a
        /// path), batched, retried with backoff.
        #[arg(long, value_name = "URL")]
        otlp_endpoint: Option<String>,
        /// Compress the requests with gzip (Content-Encoding: gzip).
        #[arg(long, requires = "otlp_endpoint")]
        otlp_gzip: bool,
        /// A header sent with every request, KEY=VALUE (repeatable): authentication.
        #[arg(long, value_name = "KEY=VALUE", requires = "otlp_endpoint")]
        otlp_header: Vec<String>,
    },
    /// Explain a CUresult code given as a number (101, 0x65) or a name (INVALID_DEVICE).
    Explain {
        /// The code.
        #[arg(allow_hyphen_values = true)]
        code: String,
        /// Output format.
        #[arg(long, value_enum, default_value_t = SimpleFormat::Text)]
        format: SimpleFormat,
    },
    /// Show what changed between two runs, each a trace file or directory.
    Diff {
        /// The first (earlier) run.
        a: PathBuf,
        /// The second run.
        b: PathBuf,
        /// Output format.
        #[arg(long, value_enum, default_value_t = SimpleFormat::Text)]
        format: SimpleFormat,
        /// Write to this file instead of standard output.
        #[arg(long, short)]
        output: Option<PathBuf>,
        /// `new`: exit 4 when B has failing calls, faults or problems that A lacks.
        #[arg(long, value_enum)]
        fail_on: Option<DiffFailOn>,
    },
}

fn main() -> ExitCode {
    // clap prints usage errors to standard error and exits 2, `--help` to standard
    // output and exits 0.
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("seedance-analyze: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Summary {
            paths,
            format,
            output,
            fail_on,
        } => {
            let report = summarize(&paths)?;
            let text = match format {
                Format::Text => render_text::render(&report),
                Format::Json => render_json::render(&report),
                Format::Html => render_html::render(&report),
            };
            emit(&text, output)?;
            if let Some(code) = no_trace_in(&report, &paths) {
                return Ok(code);
            }
            let level = fail_on.map(|f| match f {
                FailOnArg::Error => FailOn::Error,
                FailOnArg::Warning => FailOn::Warning,
            });
            match level.and_then(|l| gate::summary_gate(&report, l)) {
                Some(line) => {
                    eprintln!(
                        "seedance-analyze: --fail-on: {}",
                        seedance_analyze::escape::controls(&line)
                    );
                    Ok(ExitCode::from(gate::EXIT_GATE))
                }
                None => Ok(ExitCode::SUCCESS),
            }
        }
        Command::Export {
            paths,
            format,
            output,
            otlp_endpoint,
            otlp_gzip,
            otlp_header,
        } => {
            let ExportFormat::OtlpJson = format;
            let push = match otlp_endpoint {
                Some(e) => {
                    let url = push::logs_url(&e).map_err(anyhow::Error::msg)?;
                    let mut opts = push::PushOptions::new(url);
                    opts.gzip = otlp_gzip;
                    for h in &otlp_header {
                        let (k, v) = h
                            .split_once('=')
                            .with_context(|| format!("--otlp-header {h}: not KEY=VALUE"))?;
                        opts.headers
                            .push((k.trim().to_string(), v.trim().to_string()));
                    }
                    Some(opts)
                }
                None => None,
            };
            let (urls, local) = seedance_analyze::input::split_urls(&paths);
            let files: Vec<PathBuf> = seedance_analyze::input::collect_files(&local)
                .context("cannot read the input")?
                .0;
            let env = export::Environment::from_process();
            let resources =
                export::otlp_json_with_urls(&files, &urls, &env).map_err(anyhow::Error::msg)?;
            if push.is_none() || output.is_some() {
                emit(&resources.json, output)?;
            }
            if let Some(code) = no_trace_warning(
                resources.files_read,
                resources.files_seen,
                resources.empty_files,
                &paths,
            ) {
                return Ok(code);
            }
            let Some(opts) = push else {
                return Ok(ExitCode::SUCCESS);
            };
            let r = push::push(&resources, &opts);
            let requests = |n: u64| if n == 1 { "request" } else { "requests" };
            let records = |n: u64| if n == 1 { "log record" } else { "log records" };
            let rejected = match r.rejected_log_records {
                0 => String::new(),
                n => format!(", {n} rejected by the endpoint"),
            };
            match &r.failure {
                None => {
                    eprintln!(
                        "seedance-analyze: sent {} {} in {} {} to {}{rejected}",
                        r.log_records,
                        records(r.log_records),
                        r.requests,
                        requests(r.requests),
                        opts.url
                    );
                    Ok(ExitCode::SUCCESS)
                }
                Some(why) => {
                    let total = r.requests + r.requests_left;
                    eprintln!(
                        "seedance-analyze: OTLP export to {} failed: {why}; {} of {total} {} ({} {}) delivered{rejected}",
                        opts.url,
                        r.requests,
                        requests(total),
                        r.log_records,
                        records(r.log_records)
                    );
                    Ok(ExitCode::from(gate::EXIT_PUSH))
                }
            }
        }
        Command::Explain { code, format } => match explain::explain(&code) {
            Ok(e) => {
                let text = match format {
                    SimpleFormat::Text => explain::render_text(&e),
                    SimpleFormat::Json => render_json::to_json(&e),
                };
                emit(&text, None)?;
                Ok(if e.known {
                    ExitCode::SUCCESS
                } else {
                    ExitCode::from(1)
                })
            }
            Err(err) => {
                eprintln!("seedance-analyze: {err}");
                Ok(ExitCode::from(2))
            }
        },
        Command::Diff {
            a,
            b,
            format,
            output,
            fail_on,
        } => {
            let ra = summarize(std::slice::from_ref(&a))?;
            let rb = summarize(std::slice::from_ref(&b))?;
            let d = diff::diff(&ra, &rb);
            let text = match format {
                SimpleFormat::Text => diff::render_text(&d),
                SimpleFormat::Json => render_json::to_json(&d),
            };
            emit(&text, output)?;
            let empty_a = no_trace_in(&ra, std::slice::from_ref(&a));
            let empty_b = no_trace_in(&rb, std::slice::from_ref(&b));
            if let Some(code) = empty_a.or(empty_b) {
                return Ok(code);
            }
            match fail_on.and_then(|DiffFailOn::New| gate::diff_gate(&d)) {
                Some(line) => {
                    eprintln!(
                        "seedance-analyze: --fail-on new: {}",
                        seedance_analyze::escape::controls(&line)
                    );
                    Ok(ExitCode::from(gate::EXIT_GATE))
                }
                None => Ok(ExitCode::SUCCESS),
            }
        }
    }
}

/// The paths as the user gave them, for a message.
fn shown(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Says "no trace found in ..." on stderr and gives [`gate::EXIT_NO_TRACE`] when no trace
/// file was read (`files_read`) among the `files_seen` (`empty` of them empty).
fn no_trace_warning(
    files_read: u64,
    files_seen: u64,
    empty: u64,
    paths: &[PathBuf],
) -> Option<ExitCode> {
    if files_read > 0 {
        return None;
    }
    let why = match (files_seen, empty == files_seen) {
        (0, _) => "no files".to_string(),
        (1, true) => "1 file, empty".to_string(),
        (1, false) => "1 file, not a trace".to_string(),
        (n, true) => format!("{n} files, all empty"),
        (n, false) => format!("{n} files, none a trace"),
    };
    eprintln!(
        "seedance-analyze: warning: no trace found in {} ({why})",
        shown(paths)
    );
    Some(ExitCode::from(gate::EXIT_NO_TRACE))
}

/// [`no_trace_warning`] for a report.
fn no_trace_in(report: &Report, paths: &[PathBuf]) -> Option<ExitCode> {
    gate::no_trace(report)
        .then(|| no_trace_warning(0, report.input.files_seen, report.input.empty_files, paths))
        .flatten()
}

/// Reads the traces, with a progress bar on stderr when it is a terminal and the input is
/// large.
fn summarize(paths: &[PathBuf]) -> anyhow::Result<Report> {
    let total: u64 = if std::io::stderr().is_terminal() {
        match seedance_analyze::input::collect_files(paths) {
            Ok((files, _)) => files
                .iter()
                .filter_map(|f| std::fs::metadata(f).ok())
                .map(|m| m.len())
                .sum(),
            Err(_) => 0,
        }
    } else {
        0
    };
    let bar = (total >= PROGRESS_MIN_BYTES).then(|| {
        let b = ProgressBar::new(total);
        b.set_style(
            ProgressStyle::with_template(
                "{bar:40} {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        b
    });
    let hook = |n: u64| {
        if let Some(b) = &bar {
            b.inc(n);
        }
    };
    let options = Options {
        progress: bar.as_ref().map(|_| &hook as &(dyn Fn(u64) + Sync)),
    };
    let report = seedance_analyze::summarize(paths, &options).context("cannot read the input")?;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    Ok(report)
}

fn emit(text: &str, output: Option<PathBuf>) -> anyhow::Result<()> {
    match output {
        Some(p) => {
            std::fs::write(&p, text).with_context(|| format!("cannot write {}", p.display()))
        }
        None => {
            let mut out = std::io::stdout().lock();
            match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
                // A closed pipe (`| head`) is not an error worth reporting.
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
                r => r.context("cannot write to standard output"),
            }
        }
    }
}
