//! Register a b2nd array and a CTable with a DataFusion `SessionContext` and query them.
//!
//! Run: `cargo run --example sql_over_b2nd`

use datafusion::prelude::SessionContext;
use datafusion_blosc2::provider::{Blosc2Options, Blosc2SessionExt};

#[tokio::main]
async fn main() -> datafusion::error::Result<()> {
    let ctx = SessionContext::new();
    ctx.register_blosc2(
        "temps",
        "examples/data/temps.b2nd",
        Blosc2Options::default(),
    )
    .await?;
    ctx.register_blosc2(
        "stations",
        "examples/data/stations.b2d",
        Blosc2Options::default(),
    )
    .await?;

    // dim_0 is the day, dim_1 the station: a range on dim_0 reads only the chunks of summer.
    let df = ctx
        .sql(
            "SELECT s.name, round(avg(t.value), 2) AS summer_mean_c \
             FROM temps t JOIN stations s ON t.dim_1 = s.id \
             WHERE t.dim_0 BETWEEN 152 AND 243 \
             GROUP BY s.name ORDER BY summer_mean_c DESC LIMIT 3",
        )
        .await?;
    df.show().await?;

    // The array's attributes travel in the Arrow schema metadata.
    let schema = ctx.table("temps").await?.schema().inner().clone();
    println!("attributes: {}", schema.metadata()["blosc2.attributes"]);
    Ok(())
}
