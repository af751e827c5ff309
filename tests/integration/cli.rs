//! Drives the real `b2sql` binary: every command, every output format, the prompt fed
//! through stdin, and the error paths with their exit codes and messages.

use crate::util::{fixture, sha256_hex};
use std::io::Write;
use std::process::{Command, Output, Stdio};

fn b2sql(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_b2sql"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap()
}

fn ok(args: &[&str]) -> String {
    let o = b2sql(args);
    assert!(
        o.status.success(),
        "b2sql {args:?} failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

fn fails(args: &[&str], code: i32, needle: &str) {
    let o = b2sql(args);
    assert_eq!(o.status.code(), Some(code), "b2sql {args:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(needle),
        "b2sql {args:?}: stderr {err:?} lacks {needle:?}"
    );
    assert!(
        !err.contains("panicked") && !err.contains("RUST_BACKTRACE"),
        "{err}"
    );
    if code != 2 {
        // Usage errors (2) are clap's, with its hint lines; ours are one or two lines.
        assert!(
            err.lines().count() <= 2,
            "error takes more than two lines: {err}"
        );
    }
}

/// Runs b2sql with `input` on stdin (HOME in the temp dir, for the prompt's history file).
fn b2sql_stdin(args: &[&str], input: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_b2sql"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("HOME", std::env::temp_dir())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    child.wait_with_output().unwrap()
}

const Q: &str = "SELECT id, name FROM p WHERE id < 3 ORDER BY id";

/// `--version` names the decode kernels, and `DATAFUSION_BLOSC2_SIMD=off` changes them.
#[test]
fn version_names_the_decode_kernels() {
    let out = ok(&["--version"]);
    assert!(out.starts_with("b2sql "), "{out}");
    assert!(out.contains("\ndecode kernels: "), "{out}");
    let off = Command::new(env!("CARGO_BIN_EXE_b2sql"))
        .arg("--version")
        .env("DATAFUSION_BLOSC2_SIMD", "off")
        .output()
        .unwrap();
    let off = String::from_utf8(off.stdout).unwrap();
    assert!(
        off.contains("decode kernels: portable (DATAFUSION_BLOSC2_SIMD=off)"),
        "{off}"
    );
}

#[test]
fn query_in_every_format() {
    let t = "p=tests/fixtures/ctable/people.b2d";
    let table = ok(&["query", "-t", t, Q]);
    assert!(
        table.contains("| id | name |")
            && table.contains("| 2  | n2   |")
            && table.contains("3 rows"),
        "{table}"
    );
    assert_eq!(
        ok(&["query", "-t", t, "--format", "csv", Q]),
        "id,name\n0,n0\n1,n1\n2,n2\n"
    );
    assert_eq!(
        ok(&["query", "-t", t, "--format", "ndjson", Q]),
        "{\"id\":0,\"name\":\"n0\"}\n{\"id\":1,\"name\":\"n1\"}\n{\"id\":2,\"name\":\"n2\"}\n"
    );
    let json: serde_json::Value =
        serde_json::from_str(&ok(&["query", "-t", t, "--format", "json", Q])).unwrap();
    assert_eq!(
        json,
        serde_json::json!([{"id": 0, "name": "n0"}, {"id": 1, "name": "n1"}, {"id": 2, "name": "n2"}])
    );
    let dir = tempfile::tempdir().unwrap();
    for (fmt, magic) in [
        ("parquet", &b"PAR1"[..]),
        ("arrow", &[0xff, 0xff, 0xff, 0xff][..]),
    ] {
        let out = dir.path().join(format!("q.{fmt}"));
        ok(&[
            "query",
            "-t",
            t,
            "--format",
            fmt,
            "-o",
            out.to_str().unwrap(),
            Q,
        ]);
        let bytes = std::fs::read(&out).unwrap();
        assert!(bytes.starts_with(magic), "{fmt}");
    }
    // Parquet output read back through SQL.
    let back = ok(&[
        "query",
        "--format",
        "csv",
        &format!(
            "CREATE EXTERNAL TABLE b STORED AS PARQUET LOCATION '{}'; SELECT sum(id) AS s FROM b",
            dir.path().join("q.parquet").display()
        ),
    ]);
    assert_eq!(back, "s\n3\n");
}

/// A query that matches no rows still says what it would have returned: the table's
/// header and "0 rows", the CSV header, `[]`, and Parquet / Arrow files that read back
/// with their schema and no rows.
#[test]
fn empty_results_keep_their_columns() {
    let t = "p=tests/fixtures/ctable/people.b2d";
    let q = "SELECT id, name FROM p WHERE id < 0";
    let table = ok(&["query", "-t", t, q]);
    assert!(
        table.contains("| id | name |") && table.ends_with("0 rows\n"),
        "{table}"
    );
    assert_eq!(ok(&["query", "-t", t, "-f", "csv", q]), "id,name\n");
    assert_eq!(ok(&["query", "-t", t, "-f", "json", q]), "[]\n");
    assert_eq!(ok(&["query", "-t", t, "-f", "ndjson", q]), "");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("empty.parquet");
    ok(&[
        "query",
        "-t",
        t,
        "-f",
        "parquet",
        "-o",
        out.to_str().unwrap(),
        q,
    ]);
    let back = ok(&[
        "query",
        "-f",
        "csv",
        &format!(
            "CREATE EXTERNAL TABLE e STORED AS PARQUET LOCATION '{}'; \
             SELECT count(*) AS n FROM e; SELECT id, name FROM e",
            out.display()
        ),
    ]);
    assert_eq!(back, "n\n0\nid,name\n");
    let arrow = dir.path().join("empty.arrow");
    ok(&[
        "query",
        "-t",
        t,
        "-f",
        "arrow",
        "-o",
        arrow.to_str().unwrap(),
        q,
    ]);
    let reader = datafusion::arrow::ipc::reader::StreamReader::try_new(
        std::fs::File::open(&arrow).unwrap(),
        None,
    )
    .unwrap();
    assert_eq!(reader.schema().fields().len(), 2);
    assert_eq!(reader.map(|b| b.unwrap().num_rows()).sum::<usize>(), 0);
}

#[test]
fn quoted_paths_and_stdin_sql() {
    let out = ok(&[
        "query",
        "--format",
        "csv",
        "SELECT count(*) AS n FROM 'tests/fixtures/b2nd/geom-3d.b2nd'",
    ]);
    assert_eq!(out, "n\n1320\n");
    let o = b2sql_stdin(
        &["query", "--format", "csv"],
        b"SELECT 1 AS a;\nSELECT 'x;y' AS b; -- comment; here\n",
    );
    assert_eq!(String::from_utf8(o.stdout).unwrap(), "a\n1\nb\nx;y\n");
}

#[test]
fn prompt_through_stdin() {
    let args = [
        "query",
        "--interactive",
        "--format",
        "csv",
        "-t",
        "p=tests/fixtures/ctable/people.b2d",
    ];
    let o = b2sql_stdin(
        &args,
        b"\\d\nSELECT count(*)\n  AS n FROM p;\nSELECT nope;\n\\q\nSELECT 99;\n",
    );
    let out = String::from_utf8(o.stdout).unwrap();
    let err = String::from_utf8(o.stderr).unwrap();
    assert!(o.status.success());
    assert!(
        out.contains("datafusion,public,p,BASE TABLE"),
        "\\d lists tables: {out}"
    );
    assert!(out.contains("n\n295\n"), "multi-line statement: {out}");
    assert!(
        err.contains("error: Schema error: No field named nope"),
        "errors keep the prompt alive: {err}"
    );
    assert!(!out.contains("99"), "\\q quits: {out}");
}

#[test]
fn export_schema_inspect_decode() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("people.parquet");
    let o = b2sql(&[
        "export",
        "tests/fixtures/ctable/people.b2z",
        out.to_str().unwrap(),
        "--compression",
        "snappy",
        "--row-group-size",
        "100",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stderr).contains("wrote 295 rows"));
    let q = format!(
        "CREATE EXTERNAL TABLE e STORED AS PARQUET LOCATION '{}'; SELECT count(*) AS n, sum(id) AS s FROM e",
        out.display()
    );
    assert_eq!(ok(&["query", "--format", "csv", &q]), "n,s\n295,44433\n");

    let schema = ok(&["schema", "tests/fixtures/b2nd/attrs.b2nd"]);
    assert!(
        schema.starts_with("dim_0: Int64 not null\nvalue: Int32 not null\n"),
        "{schema}"
    );
    assert!(schema.contains("\"unit\":\"m\""), "{schema}");

    let j: serde_json::Value = serde_json::from_str(&ok(&[
        "inspect",
        "--json",
        "tests/fixtures/b2nd/attrs.b2nd",
    ]))
    .unwrap();
    assert_eq!(j["codec"], "zstd");
    assert_eq!(j["shape"], serde_json::json!([100]));
    assert_eq!(j["chunkshape"], serde_json::json!([40]));
    assert_eq!(j["nchunks"], 3);
    assert_eq!(j["attributes"]["unit"], "m");
    assert!(j.get("codec_meta").is_none(), "{j}");
    // A plugin codec's parameter: NDLZ's cell side.
    let j: serde_json::Value = serde_json::from_str(&ok(&[
        "inspect",
        "--json",
        "tests/fixtures/b2nd/ndlz-8.b2nd",
    ]))
    .unwrap();
    assert_eq!(
        (&j["codec"], &j["codec_meta"]),
        (&"ndlz (plugin 32)".into(), &8.into())
    );
    let text = ok(&["inspect", "tests/fixtures/bcolz/ctable"]);
    assert!(
        text.contains("kind: \"bcolz ctable\"") && text.contains("rows: 2500"),
        "{text}"
    );

    let raw = dir.path().join("raw.bin");
    ok(&[
        "decode",
        "tests/fixtures/chunks/codec-zstd-c5.chunk",
        raw.to_str().unwrap(),
    ]);
    let tsv = std::fs::read_to_string(fixture("expected/chunks.tsv")).unwrap();
    let line = tsv
        .lines()
        .find(|l| l.starts_with("chunks/codec-zstd-c5.chunk\t"))
        .unwrap();
    assert_eq!(
        sha256_hex(&std::fs::read(&raw).unwrap()),
        line.split('\t').nth(2).unwrap()
    );
}

/// A directory of same-schema containers (copies of two fixtures) and a glob over it:
/// every command takes them, and the file column survives the Parquet export.
#[test]
fn directories_and_globs_in_every_command() {
    let dir = tempfile::tempdir().unwrap();
    for f in ["special-full.b2nd", "special-zeros.b2nd"] {
        std::fs::copy(fixture(&format!("b2nd/{f}")), dir.path().join(f)).unwrap();
    }
    let d = dir.path().to_str().unwrap();
    let q = format!(
        "SELECT filename, count(*) AS n, sum(value) AS s FROM '{d}/' GROUP BY filename ORDER BY filename"
    );
    assert_eq!(
        ok(&["query", "--format", "csv", &q]),
        "filename,n,s\nspecial-full.b2nd,1000,3500.0\nspecial-zeros.b2nd,1000,0.0\n"
    );
    let glob = format!("{d}/*-full.b2nd");
    assert_eq!(
        ok(&["schema", d]),
        "dim_0: Int64 not null\nvalue: Float64 not null\nfilename: Dictionary(UInt16, Utf8) not null\nfiles: 2\n"
    );
    assert!(ok(&["schema", &glob]).ends_with("files: 1\n"));

    let j: serde_json::Value = serde_json::from_str(&ok(&["inspect", "--json", &glob])).unwrap();
    assert_eq!(j["kind"], "files");
    assert_eq!(j["files"], 1);
    let member = &j["members"][format!("{d}/special-full.b2nd")];
    assert_eq!(member["codec"], "zstd");
    assert_eq!(member["shape"], serde_json::json!([1000]));

    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let pq = out.join("all.parquet");
    ok(&["export", d, pq.to_str().unwrap()]);
    // File after file, each as stored: special-full's 3.5s, then special-zeros' zeros.
    {
        use datafusion::arrow::array::AsArray;
        use datafusion::arrow::datatypes::Float64Type;
        use datafusion::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
        let reader = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(&pq).unwrap())
            .unwrap()
            .build()
            .unwrap();
        let values: Vec<f64> = reader
            .map(Result::unwrap)
            .flat_map(|b| {
                let i = b.schema().index_of("value").unwrap();
                b.column(i).as_primitive::<Float64Type>().values().to_vec()
            })
            .collect();
        let want: Vec<f64> = [3.5; 1000].into_iter().chain([0.0; 1000]).collect();
        assert!(values == want, "rows out of their files' order");
    }
    // The Parquet directory has no Blosc2 entries: DataFusion's listing table reads it.
    let q = format!(
        "SELECT filename, count(*) AS n, sum(value) AS s FROM '{}/' GROUP BY filename ORDER BY filename",
        out.display()
    );
    assert_eq!(
        ok(&["query", "--format", "csv", &q]),
        "filename,n,s\nspecial-full.b2nd,1000,3500.0\nspecial-zeros.b2nd,1000,0.0\n"
    );
}

#[test]
fn errors_are_short_and_exit_nonzero() {
    fails(
        &["inspect", "tests/fixtures/missing.b2nd"],
        1,
        "tests/fixtures/missing.b2nd: not found",
    );
    fails(&["query", "SELECT * FROM"], 1, "error: SQL error");
    fails(&["query", "-t", "bad", "SELECT 1"], 1, "expected NAME=PATH");
    // A computed column this crate leaves out: named with the reason, as a one-liner.
    fails(
        &[
            "query",
            "SELECT clx FROM 'tests/fixtures/ctable/computed-functions.b2d'",
        ],
        1,
        "has no column clx: its computed column clx is left out: sqrt() in an expression \
         python-blosc2 evaluates with NumPy (because of clip()) is not supported",
    );
    fails(
        &[
            "schema",
            "tests/fixtures/c-blosc2/plugins_test_data/example_day_month_temp.b2nd",
        ],
        1,
        "pass an element type override",
    );
    fails(
        &["decode", "tests/fixtures/generate.py", "/dev/null"],
        1,
        "generate.py: invalid header field version",
    );
    fails(
        &["query", "--format", "xml", "SELECT 1"],
        2,
        "invalid value 'xml'",
    );
    let ok_override = ok(&[
        "query",
        "--format",
        "csv",
        "-t",
        "t=tests/fixtures/b2nd/dtype-le_f4.b2nd",
        "SELECT count(*) AS n FROM t",
    ]);
    assert_eq!(ok_override, "n\n1000\n");
    let s = ok(&[
        "schema",
        "--dtype",
        "<f4",
        "tests/fixtures/c-blosc2/plugins_test_data/example_day_month_temp.b2nd",
    ]);
    assert!(s.contains("value: Float32"), "{s}");
}

/// `b2sql … | head -1`: the reader closes the pipe early; b2sql stops quietly, no panic.
/// A generated filter of thousands of `OR` terms is thousands of levels of recursion in
/// DataFusion's planner and in the table's filter analyses: on a default main-thread
/// stack it aborted the process with a stack overflow (5,000 terms in a release build,
/// fewer in a debug one). It runs, and finds the rows an `IN` list finds.
#[test]
fn deep_filters_do_not_overflow_the_stack() {
    let terms: Vec<String> = (0..1500).map(|i| format!("value = {i}")).collect();
    let sql = format!(
        "SELECT count(*) FROM 'tests/fixtures/b2nd/geom-2d.b2nd' WHERE {}",
        terms.join(" OR ")
    );
    let o = b2sql_stdin(&["query", "--format", "csv"], sql.as_bytes());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let list: Vec<String> = (0..1500).map(|i| i.to_string()).collect();
    let by_list = ok(&[
        "query",
        "--format",
        "csv",
        &format!(
            "SELECT count(*) FROM 'tests/fixtures/b2nd/geom-2d.b2nd' WHERE value IN ({})",
            list.join(", ")
        ),
    ]);
    // geom-2d holds value = 2 × (flat index) + 1: the odd values below 1500.
    assert_eq!(String::from_utf8_lossy(&o.stdout), by_list);
    assert_eq!(by_list, "count(*)\n750\n");
}

#[test]
fn closed_stdout_is_not_a_panic() {
    use std::io::{BufRead, BufReader};
    for args in [
        &["inspect", "tests/fixtures/stores/tree.b2z"][..],
        &["query", "SELECT * FROM 'tests/fixtures/ctable/events.b2d'"][..],
        &[
            "query",
            "--format",
            "csv",
            "SELECT * FROM 'tests/fixtures/ctable/events.b2d'",
        ][..],
    ] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_b2sql"))
            .args(args)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut first = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut first)
            .unwrap();
        assert!(!first.is_empty(), "{args:?}");
        // The read end is dropped here; b2sql's next writes hit a closed pipe.
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

/// Store leaves through the command line: `inspect` lists a TreeStore's keys, `store#/key`
/// opens one.
#[test]
fn store_keys_and_leaves() {
    let s = ok(&["inspect", "--json", "tests/fixtures/stores/tree.b2z"]);
    let v: serde_json::Value = serde_json::from_str(&s).unwrap();
    let leaves = v["leaves"].as_object().unwrap();
    let keys: Vec<&str> = leaves.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        ["/grp/counts", "/grp/sub/flags", "/grp/table", "/temps"]
    );
    assert_eq!(leaves["/temps"]["shape"], serde_json::json!([50]));
    assert_eq!(leaves["/grp/table"]["rows"], 7);
    let s = ok(&[
        "query",
        "--format",
        "csv",
        "SELECT sum(value) AS s, count(*) AS n FROM 'tests/fixtures/stores/dict.b2z#/grp/counts'",
    ]);
    assert_eq!(s, "s,n\n66,12\n");
    let s = ok(&["schema", "tests/fixtures/stores/tree.b2d#/grp/table"]);
    assert!(s.contains("id: Int64") && s.contains("tag: Utf8"), "{s}");
}

/// Serves the repository's files over HTTP/1.1 on a local port: `HEAD` and `GET`, with
/// single `Range: bytes=a-b` requests answered 206 (what object_store's HTTP store asks).
fn serve_repo_over_http() -> u16 {
    use std::io::{BufRead, BufReader, Read};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut out = stream;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    let parts: Vec<&str> = line.split_whitespace().collect();
                    let (method, path) = (parts[0].to_string(), parts[1].to_string());
                    let mut range = None;
                    loop {
                        let mut h = String::new();
                        reader.read_line(&mut h).unwrap();
                        let h = h.trim_end();
                        if h.is_empty() {
                            break;
                        }
                        if let Some(r) = h.to_ascii_lowercase().strip_prefix("range: bytes=") {
                            let (a, b) = r.split_once('-').unwrap();
                            range = Some((a.parse::<u64>().unwrap(), b.parse::<u64>().ok()));
                        }
                    }
                    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                        .join(path.trim_start_matches('/'));
                    let opened = std::fs::File::open(&file).ok().filter(|_| file.is_file());
                    let Some(mut f) = opened else {
                        out.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
                            .unwrap();
                        continue;
                    };
                    let len = f.metadata().unwrap().len();
                    let (status, start, end) = match range {
                        Some((a, b)) => {
                            ("206 Partial Content", a, b.unwrap_or(len - 1).min(len - 1))
                        }
                        None => ("200 OK", 0, len.saturating_sub(1)),
                    };
                    let n = if len == 0 { 0 } else { end + 1 - start };
                    let mut head = format!(
                        "HTTP/1.1 {status}\r\nContent-Length: {n}\r\nAccept-Ranges: bytes\r\n"
                    );
                    if range.is_some() {
                        head += &format!("Content-Range: bytes {start}-{end}/{len}\r\n");
                    }
                    head += "\r\n";
                    out.write_all(head.as_bytes()).unwrap();
                    if method == "GET" {
                        let mut body = vec![0; n as usize];
                        std::io::Seek::seek(&mut f, std::io::SeekFrom::Start(start)).unwrap();
                        f.read_exact(&mut body).unwrap();
                        out.write_all(&body).unwrap();
                    }
                }
            });
        }
    });
    port
}

/// An `http://` location is read through an HTTP object store b2sql creates on first
/// use: the same rows as the local file, fetched with range requests.
#[test]
fn http_locations_are_read_through_object_store() {
    let port = serve_repo_over_http();
    let base = format!("http://127.0.0.1:{port}");
    let sql = |path: &str| {
        format!(
            "SELECT dim_1, round(avg(value), 3) AS mean FROM '{path}' \
             WHERE dim_0 BETWEEN 10 AND 40 GROUP BY dim_1 ORDER BY dim_1"
        )
    };
    let csv = |sql: &str| ok(&["query", "-f", "csv", sql]);
    let local = csv(&sql("examples/data/temps.b2nd"));
    let remote = csv(&sql(&format!("{base}/examples/data/temps.b2nd")));
    assert_eq!(remote, local);
    assert_eq!(local.lines().count(), 41, "{local}");
    // The README's query, both tables remote: a CTable directory opens by its known
    // file names (an HTTP store cannot list).
    let readme = |dir: &str| {
        format!(
            "SELECT s.name, round(avg(t.value), 2) AS summer_mean_c FROM '{dir}/temps.b2nd' t \
             JOIN '{dir}/stations.b2d' s ON t.dim_1 = s.id WHERE t.dim_0 BETWEEN 152 AND 243 \
             GROUP BY s.name ORDER BY summer_mean_c DESC LIMIT 5"
        )
    };
    let local = csv(&readme("examples/data"));
    let remote = csv(&readme(&format!("{base}/examples/data")));
    assert_eq!(remote, local);
    assert_eq!(local.lines().count(), 6, "{local}");
    // A missing file is an error naming it, not a panic.
    fails(
        &[
            "query",
            &format!("SELECT * FROM '{base}/examples/data/nothing.b2nd'"),
        ],
        1,
        "nothing.b2nd",
    );
}

/// `export` encodes row groups on several threads and keeps the container's row order:
/// nested columns (lists, a struct holding a list: several Parquet leaves per field) in
/// row groups of 50 rows read back as the table's own rows, in order, row group by row
/// group.
#[tokio::test]
async fn export_keeps_rows_in_order_across_row_groups() {
    use datafusion::arrow::compute::concat_batches;
    use datafusion::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    use datafusion::prelude::{SessionConfig, SessionContext};
    use datafusion_blosc2::provider::{Blosc2Options, Blosc2SessionExt};
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("nested.parquet");
    let path = "tests/fixtures/ctable/nested.b2d";
    let o = b2sql(&[
        "export",
        path,
        out.to_str().unwrap(),
        "--row-group-size",
        "50",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let reader =
        ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(&out).unwrap()).unwrap();
    assert_eq!(reader.metadata().num_row_groups(), 1194_usize.div_ceil(50));
    let schema = reader.schema().clone();
    let got: Vec<_> = reader.build().unwrap().map(Result::unwrap).collect();
    let got = concat_batches(&schema, &got).unwrap();

    let ctx = SessionContext::new_with_config(SessionConfig::new().with_target_partitions(1));
    ctx.register_blosc2("t", path, Blosc2Options::default())
        .await
        .unwrap();
    let want = ctx
        .sql("SELECT * FROM t")
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    let want = concat_batches(&want[0].schema(), &want).unwrap();
    assert_eq!(got.num_rows(), 1194);
    assert_eq!(got.num_columns(), want.num_columns());
    for (i, f) in want.schema().fields().iter().enumerate() {
        assert_eq!(got.column(i), want.column(i), "column {}", f.name());
    }
}

/// `inspect` lists a CTable's indexes and what queries use of each.
#[test]
fn inspect_lists_indexes_and_their_use() {
    let j: serde_json::Value = serde_json::from_str(&ok(&[
        "inspect",
        "--json",
        fixture("ctable/indexed.b2d").to_str().unwrap(),
    ]))
    .unwrap();
    let ix = &j["indexes"];
    assert_eq!(ix["r"], "full: block summaries, row lookups");
    assert_eq!(ix["rb"], "bucket: block summaries, row lookups");
    assert_eq!(ix["qp"], "partial: block summaries, row lookups");
    assert_eq!(ix["d"], "opsi: block summaries, row lookups");
    assert_eq!(ix["w"], "full: row lookups (by the ranks of its values)");
    let j: serde_json::Value = serde_json::from_str(&ok(&[
        "inspect",
        "--json",
        fixture("ctable/events.b2d").to_str().unwrap(),
    ]))
    .unwrap();
    assert_eq!(j["indexes"]["t"], "summary: block summaries");
}
