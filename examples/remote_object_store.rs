//! Read a container through an `ObjectStore` that is not the local disk. Here an
//! in-memory store registered as `memory://`; S3, GCS, Azure or HTTP stores from the
//! `object_store` crate plug in the same way (`ctx.register_object_store(url, store)`).
//!
//! Run: `cargo run --example remote_object_store`

use datafusion::prelude::SessionContext;
use datafusion_blosc2::provider::{Blosc2Options, Blosc2SessionExt};
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use std::sync::Arc;

#[tokio::main]
async fn main() -> datafusion::error::Result<()> {
    // Upload the sample frame and a CTable directory into the "remote" store.
    let store = Arc::new(InMemory::new());
    let bytes = std::fs::read("examples/data/temps.b2nd")?;
    store
        .put(&Path::from("data/temps.b2nd"), PutPayload::from(bytes))
        .await?;
    for entry in walk("examples/data/stations.b2d")? {
        let rel = entry
            .strip_prefix("examples/data/")
            .expect("below examples/data")
            .to_string_lossy()
            .to_string();
        store
            .put(
                &Path::from(format!("data/{rel}")),
                PutPayload::from(std::fs::read(&entry)?),
            )
            .await?;
    }

    let ctx = SessionContext::new();
    let url = url::Url::parse("memory://").expect("valid URL");
    ctx.register_object_store(&url, Arc::clone(&store) as Arc<dyn ObjectStore>);
    ctx.register_blosc2(
        "temps",
        "memory:///data/temps.b2nd",
        Blosc2Options::default(),
    )
    .await?;
    ctx.register_blosc2(
        "stations",
        "memory:///data/stations.b2d",
        Blosc2Options::default(),
    )
    .await?;
    ctx.sql("SELECT count(*) AS cells, round(min(value), 2) AS coldest FROM temps")
        .await?
        .show()
        .await?;
    ctx.sql("SELECT name, elevation_m FROM stations ORDER BY elevation_m DESC LIMIT 2")
        .await?
        .show()
        .await?;
    Ok(())
}

fn walk(dir: &str) -> std::io::Result<Vec<std::path::PathBuf>> {
    let mut out = Vec::new();
    let mut stack = vec![std::path::PathBuf::from(dir)];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d)? {
            let p = e?.path();
            if p.is_dir() {
                stack.push(p)
            } else {
                out.push(p)
            }
        }
    }
    Ok(out)
}
