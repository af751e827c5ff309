//! The interactive prompt: multi-line statements ending in `;`, history, `\d` to list
//! tables, `\d NAME` to describe one, `\q` to quit.

use crate::{CliResult, Format, output};
use datafusion::prelude::SessionContext;

/// Splits SQL text into statements at `;` outside quotes and comments.
pub fn split_statements(sql: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => {
                quote = None;
                cur.push(c);
            }
            (Some(_), c) => cur.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                cur.push(c);
            }
            (None, '-') if chars.peek() == Some(&'-') => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        break;
                    }
                }
                cur.push('\n');
            }
            (None, ';') => {
                if !cur.trim().is_empty() {
                    out.push(cur.trim().to_string());
                }
                cur.clear();
            }
            (None, c) => cur.push(c),
        }
    }
    if !cur.trim().is_empty() {
        out.push(cur.trim().to_string());
    }
    out
}

/// Runs the prompt until `\q` or end of input.
pub async fn run(ctx: &SessionContext, format: Format) -> CliResult {
    let mut rl = rustyline::DefaultEditor::new().map_err(crate::msg)?;
    let history =
        std::env::var_os("HOME").map(|h| std::path::PathBuf::from(h).join(".b2sql_history"));
    if let Some(h) = &history {
        let _ = rl.load_history(h);
    }
    outln!(
        "b2sql {} — SQL over Blosc2. End statements with ';'. \\d lists tables, \\q quits.",
        env!("CARGO_PKG_VERSION")
    );
    let mut buf = String::new();
    loop {
        let prompt = if buf.is_empty() { "b2sql> " } else { "   ..> " };
        let line = match rl.readline(prompt) {
            Ok(l) => l,
            Err(rustyline::error::ReadlineError::Interrupted) => {
                buf.clear();
                continue;
            }
            Err(_) => break,
        };
        let t = line.trim();
        if buf.is_empty() && t.starts_with('\\') {
            let _ = rl.add_history_entry(t);
            let cmd = match t {
                "\\q" => break,
                "\\d" => "SHOW TABLES".to_string(),
                d if d.starts_with("\\d ") => format!("DESCRIBE {}", d[3..].trim()),
                other => {
                    eprintln!("unknown command {other}: \\d [TABLE], \\q");
                    continue;
                }
            };
            run_one(ctx, &cmd, format).await;
            continue;
        }
        buf.push_str(&line);
        buf.push('\n');
        if t.ends_with(';') {
            let _ = rl.add_history_entry(buf.trim());
            for stmt in split_statements(&buf) {
                run_one(ctx, &stmt, format).await;
            }
            buf.clear();
        }
    }
    if let Some(h) = &history {
        let _ = rl.save_history(h);
    }
    Ok(())
}

async fn run_one(ctx: &SessionContext, sql: &str, format: Format) {
    let res = async {
        let mut sink = output::Sink::open(None, format)?;
        output::run_sql(ctx, sql, &mut sink).await?;
        sink.finish()
    }
    .await;
    if let Err(e) = res {
        eprintln!("error: {e}");
    }
}
