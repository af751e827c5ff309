//! Export a Blosc2 container to Parquet with `COPY … TO`, then read the Parquet back.
//!
//! Run: `cargo run --example export_parquet`

use datafusion::prelude::SessionContext;
use datafusion_blosc2::provider::Blosc2SessionExt;

#[tokio::main]
async fn main() -> datafusion::error::Result<()> {
    let ctx = SessionContext::new();
    ctx.enable_blosc2();
    let out = std::env::temp_dir().join("datafusion-blosc2-temps.parquet");
    let out = out.to_string_lossy();
    ctx.sql("CREATE EXTERNAL TABLE temps STORED AS BLOSC2 LOCATION 'examples/data/temps.b2nd'")
        .await?;
    ctx.sql(&format!("COPY (SELECT dim_0 AS day, dim_1 AS station, value AS temp_c FROM temps) TO '{out}' STORED AS PARQUET"))
        .await?
        .show()
        .await?;
    ctx.sql(&format!(
        "CREATE EXTERNAL TABLE back STORED AS PARQUET LOCATION '{out}'"
    ))
    .await?;
    ctx.sql("SELECT count(*) AS rows, round(avg(temp_c), 3) AS mean FROM back")
        .await?
        .show()
        .await?;
    Ok(())
}
