//! Blosc2 files under DataFusion's own `ListingTable`, through `Blosc2Format`: DataFusion
//! lists the files, infers their schema and statistics, cuts big files into byte ranges
//! for its partitions, and pushes filters into the scan, as it does for Parquet.
//!
//! Run: `cargo run --example listing_table`

use datafusion::datasource::listing::ListingOptions;
use datafusion::prelude::SessionContext;
use datafusion_blosc2::provider::Blosc2Format;
use std::sync::Arc;

#[tokio::main]
async fn main() -> datafusion::error::Result<()> {
    let ctx = SessionContext::new();
    // A directory, a single file or a glob; `with_file_extension(".b2frame")` lists
    // super-chunk frames, `(".b2z")` CTable zips, and `with_table_partition_cols` takes
    // hive `key=value` directories.
    let options = ListingOptions::new(Arc::new(Blosc2Format::default()));
    ctx.register_listing_table("temps", "examples/data/temps.b2nd", options, None, None)
        .await?;
    ctx.sql(
        "SELECT dim_1 AS station, round(avg(value), 2) AS summer_mean_c FROM temps \
         WHERE dim_0 BETWEEN 152 AND 243 GROUP BY 1 ORDER BY 2 DESC LIMIT 3",
    )
    .await?
    .show()
    .await?;
    // `count(*)` is answered from the file's statistics; EXPLAIN shows the pruning filters.
    ctx.sql("SELECT count(*) FROM temps").await?.show().await?;
    ctx.sql("EXPLAIN SELECT value FROM temps WHERE dim_0 > 300")
        .await?
        .show()
        .await?;
    Ok(())
}
