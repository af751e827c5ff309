//! SQL scans over Blosc2 containers vs DataFusion over Parquet of the same data, in one
//! run, over ZSTD and LZ4 frames: full aggregates, a 0.1 % dim range, a 1 % timestamp
//! range projection, a 5 % value filter, `SELECT * LIMIT 10`, a 1 % rectangle of a 2-D
//! array (stored twice: in chunks spanning whole rows, and in 1024 × 1024 tiles), a rare
//! value (zone maps), `count(*)`, and a filter and a grouping over a fixed-width string
//! column (numpy `<U12`). Full scans are also set against the
//! bare fetch + decode time of the chunks they touch (the floor a scan cannot beat), and
//! against the same SQL over the same columns already in memory (a `MemTable`: what
//! DataFusion's own operators cost, which a scan adds on top of its floor).
//!
//! `cargo bench --bench scan` (needs a release build of DataFusion). The data
//! (`benches/scan_data.py`, python-blosc2 4.14.1 via `B2_PYTHON`) goes to
//! `target/bench-data/scan/`; the Parquet copies are written by DataFusion (`COPY … TO`,
//! default writer settings) from the ZSTD Blosc2 tables, so both sides hold the same
//! values. The table is printed at the end and written to `target/bench-data/scan-table.md`,
//! with a second one for the single-file arrays read as DataFusion listing tables
//! (`Blosc2Format`) beside the table provider and Parquet, a third for a table of
//! 200 small files (`parts`) read the three ways, and a fourth for a directory
//! partitioned by `year=`/`station=` (`hive`), grouped by its partition columns.

use criterion::Criterion;
use datafusion::datasource::MemTable;
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion_blosc2::chunk::Chunk;
use datafusion_blosc2::container::RawChunk;
use datafusion_blosc2::container::frame::Frame;
use datafusion_blosc2::io::Location;
use datafusion_blosc2::provider::{Blosc2Options, Blosc2SessionExt};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn data_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/bench-data/scan")
}

fn python() -> String {
    std::env::var("B2_PYTHON").unwrap_or_else(|_| {
        let venv = concat!(env!("CARGO_MANIFEST_DIR"), "/.venv/bin/python");
        if std::path::Path::new(venv).exists() {
            venv.into()
        } else {
            "python3".into()
        }
    })
}

/// How the two sides' answers are compared before timing.
enum Check {
    /// The printed results hold the same numbers.
    Same,
    /// The same numbers after `SELECT count(*), sum(..) FROM (query)` (the query returns
    /// many rows).
    Summed(&'static str),
    /// Only the row count (the rows a LIMIT picks may differ).
    Rows(usize),
}

struct Query {
    name: &'static str,
    /// `{c}` is the codec (`zstd` / `lz4`).
    sql: &'static str,
    check: Check,
    /// Column files whose chunks a full scan decodes (relative to the data dir, `{c}` as
    /// above), for the decode floor.
    floor: &'static [&'static str],
    /// For full scans: the columns the query reads, loaded into a `MemTable` of the same
    /// name to time the query without any scan.
    columns: &'static str,
}

const QUERIES: &[Query] = &[
    Query {
        name: "walk: sum(value) (full scan)",
        sql: "SELECT sum(value) FROM walk_{c}",
        check: Check::Same,
        floor: &["walk-{c}.b2nd"],
        columns: "value",
    },
    Query {
        name: "walk: min, max, avg (full scan)",
        sql: "SELECT min(value), max(value), avg(value) FROM walk_{c}",
        check: Check::Same,
        floor: &["walk-{c}.b2nd"],
        columns: "value",
    },
    Query {
        name: "walk: 0.1% dim_0 range",
        sql: "SELECT sum(value) FROM walk_{c} WHERE dim_0 BETWEEN 5000000 AND 5009999",
        check: Check::Same,
        floor: &[],
        columns: "",
    },
    Query {
        name: "walk: value > 2000 (rare)",
        sql: "SELECT count(*) FROM walk_{c} WHERE value > 2000",
        check: Check::Same,
        floor: &[],
        columns: "",
    },
    Query {
        name: "ticks: sum(price), avg(qty) (full scan)",
        sql: "SELECT sum(price), avg(qty) FROM ticks_{c}",
        check: Check::Same,
        floor: &[
            "ticks-{c}.b2d/_cols/price.b2nd",
            "ticks-{c}.b2d/_cols/qty.b2nd",
        ],
        columns: "price, qty",
    },
    Query {
        name: "ticks: count and avg(price) per qty, top 3 (int32 column)",
        sql: "SELECT qty, count(*) AS n, avg(price) FROM ticks_{c} GROUP BY qty \
              ORDER BY n DESC, qty LIMIT 3",
        check: Check::Same,
        floor: &[
            "ticks-{c}.b2d/_cols/price.b2nd",
            "ticks-{c}.b2d/_cols/qty.b2nd",
        ],
        columns: "price, qty",
    },
    Query {
        name: "ticks: count and avg(price) per day, first 3 (computed key)",
        sql: "SELECT date_trunc('day', t) AS d, count(*) AS n, avg(price) FROM ticks_{c} \
              GROUP BY d ORDER BY d LIMIT 3",
        check: Check::Same,
        floor: &[
            "ticks-{c}.b2d/_cols/t.b2nd",
            "ticks-{c}.b2d/_cols/price.b2nd",
        ],
        columns: "t, price",
    },
    Query {
        name: "ticks: 1% t range, project id, price",
        sql: "SELECT id, price FROM ticks_{c} WHERE t BETWEEN to_timestamp_millis(1705000000000) \
              AND to_timestamp_millis(1705099999000)",
        check: Check::Summed("count(*), sum(id), sum(price)"),
        floor: &[],
        columns: "",
    },
    Query {
        name: "ticks: 5% qty > 950",
        sql: "SELECT count(*), avg(price) FROM ticks_{c} WHERE qty > 950",
        check: Check::Same,
        floor: &[],
        columns: "",
    },
    Query {
        name: "ticks: SELECT * LIMIT 10",
        sql: "SELECT * FROM ticks_{c} LIMIT 10",
        check: Check::Rows(10),
        floor: &[],
        columns: "",
    },
    Query {
        name: "ticks: count(*)",
        sql: "SELECT count(*) FROM ticks_{c}",
        check: Check::Same,
        floor: &[],
        columns: "",
    },
    Query {
        name: "orders: id = one value (FULL index)",
        sql: "SELECT id, price, qty FROM orders_{c} WHERE id = 864199",
        check: Check::Rows(1),
        floor: &[],
        columns: "",
    },
    Query {
        name: "orders: id IN 4 values (FULL index)",
        sql: "SELECT count(*), sum(price) FROM orders_{c} WHERE id IN (7, 700007, 864199, 69999993)",
        check: Check::Same,
        floor: &[],
        columns: "",
    },
    Query {
        name: "orders: code = one value (BUCKET index)",
        sql: "SELECT id, price, code FROM orders_{c} WHERE code = 864199",
        check: Check::Rows(1),
        floor: &[],
        columns: "",
    },
    Query {
        name: "skus: sku = one value (string, FULL index)",
        sql: "SELECT sku, qty FROM skus_{c} WHERE sku = 'S000864199'",
        check: Check::Rows(1),
        floor: &[],
        columns: "",
    },
    Query {
        name: "skus: ref = one value (utf8, FULL index by rank)",
        sql: "SELECT ref, qty FROM skus_{c} WHERE ref = 'S000864199'",
        check: Check::Rows(1),
        floor: &[],
        columns: "",
    },
    Query {
        name: "skus: count and sum(qty) per substr(sku, 1, 6), top 3 (computed text key)",
        sql: "SELECT substr(sku, 1, 6) AS p, count(*) AS n, sum(qty) AS q FROM skus_{c} \
              GROUP BY p ORDER BY n DESC, p LIMIT 3",
        check: Check::Same,
        floor: &["skus-{c}.b2d/_cols/sku.b2nd"],
        columns: "sku, qty",
    },
    Query {
        name: "skus: sku LIKE a prefix (string, FULL index)",
        sql: "SELECT count(*), sum(qty) FROM skus_{c} WHERE sku LIKE 'S0008641%'",
        check: Check::Same,
        floor: &[],
        columns: "",
    },
    Query {
        name: "skus: at = one timestamp (BUCKET index)",
        sql: "SELECT sku, at FROM skus_{c} WHERE at = to_timestamp_millis(1700000864000)",
        check: Check::Rows(1),
        floor: &[],
        columns: "",
    },
    Query {
        name: "skus: sum(qty) per sku, top 3 (10 M distinct texts)",
        sql: "SELECT sku, sum(qty) AS s FROM skus_{c} GROUP BY sku ORDER BY s DESC, sku LIMIT 3",
        check: Check::Same,
        floor: &[],
        columns: "",
    },
    Query {
        name: "orders: join on id with 5 keys (dynamic filter, FULL index)",
        sql: "SELECT count(*), sum(o.price) FROM orders_{c} o \
              JOIN (VALUES (7), (700007), (864199), (69999993), (3500000)) k(id) ON o.id = k.id",
        check: Check::Same,
        floor: &[],
        columns: "",
    },
    Query {
        name: "skus: join on sku with 3 keys (dynamic filter, FULL index)",
        sql: "SELECT count(*), sum(s.qty) FROM skus_{c} s \
              JOIN (VALUES ('S000864199'), ('S000000007'), ('S069999993')) k(sku) ON s.sku = k.sku",
        check: Check::Same,
        floor: &[],
        columns: "",
    },
    Query {
        name: "grid: sum(value) (full scan, 67 M)",
        sql: "SELECT sum(value) FROM grid_{c}",
        check: Check::Same,
        floor: &["grid-{c}.b2nd"],
        columns: "value",
    },
    Query {
        name: "grid: 1% rectangle",
        sql: "SELECT sum(value), count(*) FROM grid_{c} \
              WHERE dim_0 BETWEEN 3000 AND 3818 AND dim_1 BETWEEN 4000 AND 4818",
        check: Check::Same,
        floor: &[],
        columns: "",
    },
    Query {
        name: "grid: max per row (GROUP BY dim_0)",
        sql: "SELECT dim_0, max(value) AS m FROM grid_{c} GROUP BY dim_0",
        check: Check::Summed("count(*), sum(dim_0), sum(m)"),
        floor: &[],
        columns: "",
    },
    Query {
        name: "tiles: sum(value) (full scan, 67 M)",
        sql: "SELECT sum(value) FROM tiles_{c}",
        check: Check::Same,
        floor: &["tiles-{c}.b2nd"],
        columns: "value",
    },
    Query {
        name: "tiles: 1% rectangle",
        sql: "SELECT sum(value), count(*) FROM tiles_{c} \
              WHERE dim_0 BETWEEN 3000 AND 3818 AND dim_1 BETWEEN 4000 AND 4818",
        check: Check::Same,
        floor: &[],
        columns: "",
    },
    Query {
        name: "names: name = one of 2,000 (full scan of a <U12 column)",
        sql: "SELECT count(*) FROM names_{c} WHERE name = 'abjvhujq'",
        check: Check::Same,
        floor: &["names-{c}.b2d/_cols/name.b2nd"],
        columns: "name",
    },
    Query {
        name: "names: name LIKE 'ab%', count and sum(id)",
        sql: "SELECT count(*), sum(id) FROM names_{c} WHERE name LIKE 'ab%'",
        check: Check::Same,
        floor: &[
            "names-{c}.b2d/_cols/name.b2nd",
            "names-{c}.b2d/_cols/id.b2nd",
        ],
        columns: "name, id",
    },
    Query {
        name: "names: name LIKE '%ab%', count and sum(id)",
        sql: "SELECT count(*), sum(id) FROM names_{c} WHERE name LIKE '%ab%'",
        check: Check::Same,
        floor: &[
            "names-{c}.b2d/_cols/name.b2nd",
            "names-{c}.b2d/_cols/id.b2nd",
        ],
        columns: "name, id",
    },
    Query {
        name: "names: min(name) and max(name) (<U12 column)",
        sql: "SELECT min(name), max(name) FROM names_{c}",
        check: Check::Same,
        floor: &["names-{c}.b2d/_cols/name.b2nd"],
        columns: "name",
    },
    Query {
        name: "names: count per name, top 3",
        sql: "SELECT name, count(*) AS n FROM names_{c} GROUP BY name ORDER BY n DESC, name LIMIT 3",
        check: Check::Same,
        floor: &["names-{c}.b2d/_cols/name.b2nd"],
        columns: "name",
    },
    Query {
        name: "names: count per length(name) (computed key from the records)",
        sql: "SELECT length(name) AS l, count(*) AS n FROM names_{c} GROUP BY l ORDER BY l",
        check: Check::Same,
        floor: &["names-{c}.b2d/_cols/name.b2nd"],
        columns: "name",
    },
    Query {
        name: "cats: name = one of 2,000 (dictionary column)",
        sql: "SELECT count(*) FROM cats_{c} WHERE name = 'abjvhujq'",
        check: Check::Same,
        floor: &["cats-{c}.b2d/_cols/name.b2nd"],
        columns: "name",
    },
    Query {
        name: "cats: count per name, top 3 (dictionary column)",
        sql: "SELECT name, count(*) AS n FROM cats_{c} GROUP BY name ORDER BY n DESC, name LIMIT 3",
        check: Check::Same,
        floor: &["cats-{c}.b2d/_cols/name.b2nd"],
        columns: "name",
    },
    Query {
        name: "cats: count and avg(length(text)) per name, top 3 (computed argument)",
        sql: "SELECT name, count(*) AS n, avg(length(text)) AS l FROM cats_{c} GROUP BY name \
              ORDER BY n DESC, name LIMIT 3",
        check: Check::Same,
        floor: &[
            "cats-{c}.b2d/_cols/name.b2nd",
            "cats-{c}.b2d/_cols/text.b2b",
        ],
        columns: "name, text",
    },
    Query {
        name: "cats: text = one of 2,000 (vlstring column)",
        sql: "SELECT count(*) FROM cats_{c} WHERE text = 'abjvhujq'",
        check: Check::Same,
        floor: &["cats-{c}.b2d/_cols/text.b2b"],
        columns: "text",
    },
    Query {
        name: "cats: text LIKE '%ab%' (vlstring column)",
        sql: "SELECT count(*) FROM cats_{c} WHERE text LIKE '%ab%'",
        check: Check::Same,
        floor: &["cats-{c}.b2d/_cols/text.b2b"],
        columns: "text",
    },
    Query {
        name: "cats: min(text) and max(text) (vlstring column)",
        sql: "SELECT min(text), max(text) FROM cats_{c}",
        check: Check::Same,
        floor: &["cats-{c}.b2d/_cols/text.b2b"],
        columns: "text",
    },
    Query {
        name: "cats: count per text, top 3 (vlstring column)",
        sql: "SELECT text, count(*) AS n FROM cats_{c} GROUP BY text ORDER BY n DESC, text LIMIT 3",
        check: Check::Same,
        floor: &["cats-{c}.b2d/_cols/text.b2b"],
        columns: "text",
    },
];

/// Queries over the single-file arrays for the listing-table table (with the `QUERIES`
/// over them): TopKs on a coordinate, which a listing scan reads last first; a value
/// filter; a join on an inner coordinate, whose key bounds cut the units' boxes.
const LISTING_EXTRA: &[&str] = &[
    "SELECT * FROM walk_{c} ORDER BY dim_0 DESC LIMIT 10",
    "SELECT * FROM grid_{c} ORDER BY dim_0 DESC LIMIT 10",
    "SELECT count(*) FROM grid_{c} WHERE value > 0.5",
    "SELECT count(*), avg(value) FROM tiles_{c} t JOIN (VALUES (3), (4000)) k(c) ON t.dim_1 = k.c",
];

/// The same files as DataFusion `ListingTable`s through `Blosc2Format`, timed against the
/// table provider and Parquet in the same rounds: a second table, for the queries over
/// the single-file arrays (`walk`, `grid`, `tiles`).
fn listing_table(
    rt: &tokio::runtime::Runtime,
    b2: &SessionContext,
    pq: &SessionContext,
    threads: usize,
    only: &str,
) -> String {
    use datafusion::datasource::listing::ListingOptions;
    use datafusion_blosc2::provider::Blosc2Format;
    let lt = SessionContext::new_with_config(SessionConfig::new().with_target_partitions(threads));
    for name in ["walk", "grid", "tiles"] {
        for c in CODECS {
            let file = data_dir().join(format!("{name}-{c}.b2nd"));
            let options = ListingOptions::new(Arc::new(Blosc2Format::default()));
            rt.block_on(lt.register_listing_table(
                format!("{name}_{c}"),
                file.to_str().unwrap(),
                options,
                None,
                None,
            ))
            .unwrap();
        }
    }
    let sqls = QUERIES
        .iter()
        .map(|q| (q.name, q.sql, &q.check))
        .chain(LISTING_EXTRA.iter().map(|s| (*s, *s, &Check::Same)))
        .filter(|(n, s, _)| {
            n.contains(only) && ["walk_", "grid_", "tiles_"].iter().any(|t| s.contains(t))
        });
    let mut rows = Vec::new();
    for (name, sql, check) in sqls {
        for codec in CODECS {
            let sql = sql.replace("{c}", codec);
            // Many rows, in any order: compared through their sums.
            let compared = match check {
                Check::Summed(aggs) => format!("SELECT {aggs} FROM ({sql})"),
                _ => sql.clone(),
            };
            let (a, b) = (
                rt.block_on(printed(b2, &compared)),
                rt.block_on(printed(&lt, &compared)),
            );
            assert!(
                same_numbers(&a, &b),
                "{sql}: provider and listing disagree:\n{a}\n{b}"
            );
            let t = interleaved_ms(&mut [
                &mut || {
                    rt.block_on(run(b2, &sql));
                },
                &mut || {
                    rt.block_on(run(&lt, &sql));
                },
                &mut || {
                    rt.block_on(run(pq, &sql));
                },
            ]);
            rows.push(format!(
                "| {name} [{codec}] | {:.1} | {:.1} | {:.1} | {:.2}× |",
                t[0].median,
                t[1].median,
                t[2].median,
                t[2].median / t[1].median
            ));
        }
    }
    format!(
        "| query ({threads} partitions) | table provider ms | listing table ms | Parquet ms | Parquet/listing |\n|---|---|---|---|---|\n{}\n",
        rows.join("\n")
    )
}

/// A data set of many files, read three ways ([`many_files_table`]).
struct FileSet {
    /// Its directory's name before `-{codec}`; the Parquet copy is `{name}.parquet/`.
    name: &'static str,
    /// Its hive partition columns (`key=value` directories), outermost first.
    partitions: &'static [&'static str],
    /// `{c}` is the codec.
    queries: &'static [&'static str],
    /// The table's heading.
    about: &'static str,
}

/// `parts`: the walk as 200 files of 50,000 values. Queries: a full aggregate, a little of
/// every file, half of every file.
const MANY_FILES: FileSet = FileSet {
    name: "parts",
    partitions: &[],
    queries: &[
        "SELECT sum(value) FROM parts_{c}",
        "SELECT count(*), sum(value) FROM parts_{c} WHERE dim_0 BETWEEN 100 AND 199",
        "SELECT max(value) FROM parts_{c} WHERE dim_0 < 25000",
    ],
    about: "200 files",
};

/// `hive`: the walk as 16 files of 625,000 values in `year=…/station=…/` directories.
/// Queries: grouped by the partition columns, whole and under a filter.
const HIVE_FILES: FileSet = FileSet {
    name: "hive",
    partitions: &["year", "station"],
    queries: &[
        "SELECT station, count(*), avg(value), max(value) FROM hive_{c} GROUP BY station \
         ORDER BY station",
        "SELECT year, station, sum(value) FROM hive_{c} WHERE value > 0 \
         GROUP BY year, station ORDER BY year, station",
    ],
    about: "16 files in year=/station= directories",
};

/// A table of many files (`{name}-{c}/`): the table provider over the directory, a
/// DataFusion listing table over it, and Parquet (one file per member, written by
/// DataFusion from the members), in the same rounds. What it times beyond the scans is
/// per-file work (listing, opening, planning) and what each side does with the files'
/// partition values.
fn many_files_table(
    rt: &tokio::runtime::Runtime,
    threads: usize,
    only: &str,
    set: &FileSet,
) -> String {
    use datafusion::arrow::datatypes::DataType;
    use datafusion::datasource::listing::ListingOptions;
    use datafusion::prelude::ParquetReadOptions;
    use datafusion_blosc2::provider::Blosc2Format;
    let cfg = || SessionConfig::new().with_target_partitions(threads);
    let (b2, lt, pq) = (
        SessionContext::new_with_config(cfg()),
        SessionContext::new_with_config(cfg()),
        SessionContext::new_with_config(cfg()),
    );
    let partition_cols = || -> Vec<(String, DataType)> {
        (set.partitions.iter())
            .map(|p| (p.to_string(), DataType::Utf8))
            .collect()
    };
    for c in CODECS {
        let dir = data_dir().join(format!("{}-{c}", set.name));
        let name = format!("{}_{c}", set.name);
        rt.block_on(b2.register_blosc2(&name, dir.to_str().unwrap(), Blosc2Options::default()))
            .unwrap();
        let options = ListingOptions::new(Arc::new(Blosc2Format::default()))
            .with_table_partition_cols(partition_cols());
        let url = format!("{}/", dir.display());
        rt.block_on(lt.register_listing_table(&name, &url, options, None, None))
            .unwrap();
    }
    let parquet = data_dir().join(format!("{}.parquet", set.name));
    if !parquet.join("_complete").exists() {
        let _ = std::fs::remove_dir_all(&parquet);
        std::fs::create_dir_all(&parquet).unwrap();
        let source = data_dir().join(format!("{}-zstd", set.name));
        if set.partitions.is_empty() {
            let one = SessionContext::new();
            let mut members: Vec<_> = std::fs::read_dir(&source)
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect();
            members.sort();
            for part in members {
                let stem = part.file_stem().unwrap().to_str().unwrap().to_string();
                let out = parquet.join(format!("{stem}.parquet"));
                rt.block_on(async {
                    one.register_blosc2("p", part.to_str().unwrap(), Blosc2Options::default())
                        .await
                        .unwrap();
                    write_parquet(&one, "p", &out).await;
                    one.deregister_table("p").unwrap();
                });
            }
        } else {
            // DataFusion writes the partitions' directories itself.
            let sql = format!(
                "COPY (SELECT * FROM {}_zstd) TO '{}/' STORED AS PARQUET PARTITIONED BY ({})",
                set.name,
                parquet.display(),
                set.partitions.join(", ")
            );
            rt.block_on(async { b2.sql(&sql).await.unwrap().collect().await.unwrap() });
        }
        std::fs::write(parquet.join("_complete"), "").unwrap();
    }
    for c in CODECS {
        let url = format!("{}/", parquet.display());
        let options = ParquetReadOptions::default().table_partition_cols(partition_cols());
        rt.block_on(pq.register_parquet(format!("{}_{c}", set.name), &url, options))
            .unwrap();
    }
    let mut rows = Vec::new();
    for sql in set.queries.iter().filter(|s| s.contains(only)) {
        for codec in CODECS {
            let sql = sql.replace("{c}", codec);
            let printed_by = |ctx| rt.block_on(printed(ctx, &sql));
            let (a, b, p) = (printed_by(&b2), printed_by(&lt), printed_by(&pq));
            assert!(
                same_numbers(&a, &b) && same_numbers(&a, &p),
                "{sql}: the three sides disagree:\n{a}\n{b}\n{p}"
            );
            let t = interleaved_ms(&mut [
                &mut || {
                    rt.block_on(run(&b2, &sql));
                },
                &mut || {
                    rt.block_on(run(&lt, &sql));
                },
                &mut || {
                    rt.block_on(run(&pq, &sql));
                },
            ]);
            rows.push(format!(
                "| {sql} [{codec}] | {:.1} | {:.1} | {:.1} | {:.2}× |",
                t[0].median,
                t[1].median,
                t[2].median,
                t[2].median / t[1].median
            ));
        }
    }
    format!(
        "| query ({threads} partitions, {}) | table provider ms | listing table ms | Parquet ms | Parquet/listing |\n|---|---|---|---|---|\n{}\n",
        set.about,
        rows.join("\n")
    )
}

const CODECS: [&str; 2] = ["zstd", "lz4"];
const DATASETS: [(&str, &str); 8] = [
    ("walk", "b2nd"),
    ("ticks", "b2d"),
    ("orders", "b2d"),
    ("skus", "b2d"),
    ("grid", "b2nd"),
    ("tiles", "b2nd"),
    ("names", "b2d"),
    ("cats", "b2d"),
];

async fn contexts(partitions: usize) -> (SessionContext, SessionContext) {
    let dir = data_dir();
    let cfg = || SessionConfig::new().with_target_partitions(partitions);
    let b2 = SessionContext::new_with_config(cfg());
    let pq = SessionContext::new_with_config(cfg());
    for (name, ext) in DATASETS {
        for c in CODECS {
            let file = dir.join(format!("{name}-{c}.{ext}"));
            b2.register_blosc2(
                &format!("{name}_{c}"),
                file.to_str().unwrap(),
                Blosc2Options::default(),
            )
            .await
            .unwrap();
        }
        let parquet = dir.join(format!("{name}.parquet"));
        if !parquet.exists() {
            write_parquet(&b2, &format!("{name}_zstd"), &parquet).await;
        }
        for c in CODECS {
            pq.register_parquet(
                &format!("{name}_{c}"),
                parquet.to_str().unwrap(),
                Default::default(),
            )
            .await
            .unwrap();
        }
    }
    (b2, pq)
}

/// Writes every row of `table` to the Parquet file `out` (DataFusion's default writer
/// settings).
async fn write_parquet(ctx: &SessionContext, table: &str, out: &std::path::Path) {
    let sql = format!(
        "COPY (SELECT * FROM {table}) TO '{}' STORED AS PARQUET",
        out.display()
    );
    ctx.sql(&sql).await.unwrap().collect().await.unwrap();
}

/// Runs `sql` to completion; returns the number of rows.
async fn run(ctx: &SessionContext, sql: &str) -> usize {
    let b = ctx.sql(sql).await.unwrap().collect().await.unwrap();
    b.iter().map(|b| b.num_rows()).sum()
}

async fn printed(ctx: &SessionContext, sql: &str) -> String {
    let b = ctx.sql(sql).await.unwrap().collect().await.unwrap();
    datafusion::arrow::util::pretty::pretty_format_batches(&b)
        .unwrap()
        .to_string()
}

/// The numbers in two printed results agree (floats to 1e-9 relative: the two sides sum
/// in different orders).
fn same_numbers(a: &str, b: &str) -> bool {
    let nums = |s: &str| -> Vec<f64> {
        s.split(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == 'e'))
            .filter_map(|t| t.parse().ok())
            .collect()
    };
    let (x, y) = (nums(a), nums(b));
    x.len() == y.len()
        && x.iter()
            .zip(&y)
            .all(|(p, q)| (p - q).abs() <= 1e-9 * p.abs().max(q.abs()).max(1.0))
}

/// Milliseconds of each of `fs` over 15 rounds, the functions run in turn within a round
/// (so slow drift of this machine's speed hits every side alike): each one's median and
/// fastest run. Other tenants of this VM only ever slow a run down, so the fastest runs
/// are the least disturbed ones (as in `benches/decode.rs`).
fn interleaved_ms(fs: &mut [&mut dyn FnMut()]) -> Vec<Timing> {
    let mut t = vec![Vec::new(); fs.len()];
    for _ in 0..15 {
        for (f, t) in fs.iter_mut().zip(&mut t) {
            let s = Instant::now();
            f();
            t.push(s.elapsed().as_secs_f64() * 1e3);
        }
    }
    t.into_iter()
        .map(|mut v| {
            v.sort_by(f64::total_cmp);
            Timing {
                median: v[v.len() / 2],
                fastest: v[0],
            }
        })
        .collect()
}

/// One side's run times over the rounds of [`interleaved_ms`], in milliseconds.
#[derive(Clone, Copy)]
struct Timing {
    median: f64,
    fastest: f64,
}

/// Fetching (through the same local object store) and decoding every chunk of some files
/// on `threads` threads, each reusing one output buffer: what a full scan of those columns
/// cannot go below. Frames are opened beforehand, as a registered table has them.
struct DecodeFloor {
    frames: Vec<Frame>,
    work: Vec<(usize, u64)>,
}

impl DecodeFloor {
    fn open(rt: &tokio::runtime::Runtime, files: &[PathBuf]) -> Self {
        let frames: Vec<Frame> = rt.block_on(async {
            let mut out = Vec::new();
            for f in files {
                out.push(Frame::open(&Location::local(f).unwrap()).await.unwrap());
            }
            out
        });
        let work = frames
            .iter()
            .enumerate()
            .flat_map(|(k, f)| (0..f.nchunks()).map(move |i| (k, i)))
            .collect();
        DecodeFloor { frames, work }
    }

    fn run(&self, rt: &tokio::runtime::Runtime, threads: usize) {
        std::thread::scope(|s| {
            for t in 0..threads {
                let (frames, work, handle) = (&self.frames, &self.work, rt.handle());
                s.spawn(move || {
                    let mut buf = Vec::new();
                    for &(k, i) in work.iter().skip(t).step_by(threads) {
                        let raw = handle.block_on(frames[k].fetch_chunks(&[i])).unwrap();
                        if let RawChunk::Stored(b) = &raw[0] {
                            let chunk = Chunk::parse(b).unwrap();
                            buf.resize(chunk.nbytes(), 0);
                            chunk.decode_into(&mut buf).unwrap();
                        }
                    }
                });
            }
        })
    }
}

/// A session holding `columns` of `table` in memory (a `MemTable` of the same name, in
/// `threads` partitions): the same SQL there costs DataFusion's own share of a full scan.
fn in_memory(
    rt: &tokio::runtime::Runtime,
    b2: &SessionContext,
    table: &str,
    columns: &str,
    threads: usize,
) -> SessionContext {
    let mem = SessionContext::new_with_config(SessionConfig::new().with_target_partitions(threads));
    rt.block_on(async {
        let df = b2
            .sql(&format!("SELECT {columns} FROM {table}"))
            .await
            .unwrap();
        let schema = Arc::clone(df.schema().inner());
        let parts = df.collect_partitioned().await.unwrap();
        let t = MemTable::try_new(schema, parts).unwrap();
        mem.register_table(table, Arc::new(t)).unwrap();
    });
    mem
}

fn main() {
    let dir = data_dir();
    let st = std::process::Command::new(python())
        .args([
            concat!(env!("CARGO_MANIFEST_DIR"), "/benches/scan_data.py"),
            dir.to_str().unwrap(),
        ])
        .status()
        .expect("run benches/scan_data.py");
    assert!(st.success(), "benches/scan_data.py failed (set B2_PYTHON)");
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()
        .unwrap();
    let (b2, pq) = rt.block_on(contexts(threads));
    let mut c = Criterion::default()
        .configure_from_args()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
        .sample_size(10);
    let mut rows = Vec::new();
    // `B2_SCAN_ONLY=walk` runs the queries whose name contains it (for profiling).
    let only = std::env::var("B2_SCAN_ONLY").unwrap_or_default();
    for q in QUERIES.iter().filter(|q| q.name.contains(only.as_str())) {
        for codec in CODECS {
            let sql = q.sql.replace("{c}", codec);
            let name = format!("{} [{codec}]", q.name);
            // Same answer on both sides (also warms caches and, for Blosc2, the zone maps).
            match q.check {
                Check::Same | Check::Summed(_) => {
                    let check = match q.check {
                        Check::Summed(aggs) => format!("SELECT {aggs} FROM ({sql})"),
                        _ => sql.clone(),
                    };
                    let a = rt.block_on(printed(&b2, &check));
                    let b = rt.block_on(printed(&pq, &check));
                    assert!(
                        same_numbers(&a, &b),
                        "{name}: Blosc2 and Parquet disagree:\n{a}\n{b}"
                    );
                }
                Check::Rows(n) => {
                    assert_eq!(rt.block_on(run(&b2, &sql)), n, "{name}: Blosc2 rows");
                    assert_eq!(rt.block_on(run(&pq, &sql)), n, "{name}: Parquet rows");
                }
            }
            let mut g = c.benchmark_group(&name);
            g.bench_function("blosc2", |bch| bch.iter(|| rt.block_on(run(&b2, &sql))));
            g.bench_function("parquet", |bch| bch.iter(|| rt.block_on(run(&pq, &sql))));
            g.finish();
            let run_b2 = &mut || {
                rt.block_on(run(&b2, &sql));
            };
            let run_pq = &mut || {
                rt.block_on(run(&pq, &sql));
            };
            let floor = if q.floor.is_empty() {
                let t = interleaved_ms(&mut [run_b2, run_pq]);
                (t[0].median, t[1].median, " | | | | ".to_string())
            } else {
                let files: Vec<PathBuf> = q
                    .floor
                    .iter()
                    .map(|f| dir.join(f.replace("{c}", codec)))
                    .collect();
                let floor = DecodeFloor::open(&rt, &files);
                let table = q
                    .sql
                    .split("FROM ")
                    .nth(1)
                    .and_then(|t| t.split(' ').next());
                let table = table.expect("FROM table").replace("{c}", codec);
                let mem = in_memory(&rt, &b2, &table, q.columns, threads);
                let t = interleaved_ms(&mut [
                    run_b2,
                    run_pq,
                    &mut || floor.run(&rt, threads),
                    &mut || {
                        rt.block_on(run(&mem, &sql));
                    },
                ]);
                let (tb, f, m) = (t[0].median, t[2].median, t[3].median);
                let fastest = t[0].fastest / t[2].fastest;
                (
                    tb,
                    t[1].median,
                    format!(
                        "{f:.1} | {:.2}× | {fastest:.2}× | {m:.1} | {:.2}×",
                        tb / f,
                        tb / (f + m)
                    ),
                )
            };
            let (tb, tp, floor) = floor;
            rows.push(format!(
                "| {name} | {tb:.1} | {tp:.1} | {:.2}× | {floor} |",
                tp / tb
            ));
        }
    }
    let size = |p: &str| {
        std::process::Command::new("du")
            .args(["-sh", dir.join(p).to_str().unwrap()])
            .output()
            .map(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .split('\t')
                    .next()
                    .unwrap_or("")
                    .to_string()
            })
            .unwrap_or_default()
    };
    let sizes: Vec<String> = DATASETS
        .iter()
        .map(|(n, ext)| {
            format!(
                "{n}: zstd {}, lz4 {}, parquet {}",
                size(&format!("{n}-zstd.{ext}")),
                size(&format!("{n}-lz4.{ext}")),
                size(&format!("{n}.parquet"))
            )
        })
        .collect();
    let table = format!(
        "On disk: {}.\n\n| query ({threads} partitions) | Blosc2 ms | Parquet ms | Parquet/Blosc2 | decode floor ms | Blosc2/floor | Blosc2/floor, fastest runs | in memory ms | Blosc2/(floor + in memory) |\n|---|---|---|---|---|---|---|---|---|\n{}\n",
        sizes.join("; "),
        rows.join("\n")
    );
    let listing = listing_table(&rt, &b2, &pq, threads, &only);
    let many = many_files_table(&rt, threads, &only, &MANY_FILES);
    let hive = many_files_table(&rt, threads, &only, &HIVE_FILES);
    let table = format!(
        "{table}\nListing tables (`Blosc2Format`):\n\n{listing}\nMany small files (`parts`):\n\n{many}\nA partitioned directory (`hive`):\n\n{hive}"
    );
    println!("\n{table}");
    std::fs::write(dir.join("../scan-table.md"), table).unwrap();
}
