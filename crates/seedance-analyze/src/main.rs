//! `seedance-analyze`: the command line over the `seedance_analyze` library. It only parses
//! arguments, shows progress and writes what the library renders.
//!
//! Exit codes: 0 success; 1 `explain` of a number the CUresult table lacks; 2 bad usage,
//! a path that does not exist, or an `explain` argument that is neither a number nor a
//! known name.

use anyhow::Context;
use clap::{Parser, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use seedance_analyze::{diff, explain, render_html, render_json, render_text, Options, Report};
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
    },
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
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
        } => {
            let report = summarize(&paths)?;
            let text = match format {
                Format::Text => render_text::render(&report),
                Format::Json => render_json::render(&report),
                Format::Html => render_html::render(&report),
            };
            emit(&text, output)?;
            Ok(ExitCode::SUCCESS)
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
        } => {
            let ra = summarize(std::slice::from_ref(&a))?;
            let rb = summarize(std::slice::from_ref(&b))?;
            let d = diff::diff(&ra, &rb);
            let text = match format {
                SimpleFormat::Text => diff::render_text(&d),
                SimpleFormat::Json => render_json::to_json(&d),
            };
            emit(&text, output)?;
            Ok(ExitCode::SUCCESS)
        }
    }
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
