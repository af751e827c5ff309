//! Remote locations on the command line: `s3://bucket/x.b2nd`, `gs://…`, `az://…`,
//! `https://host/x.b2nd`. The session's object store registry creates the store of a
//! URL the first time a query names it, configured from the environment as the
//! `object_store` crate's builders read it (`AWS_ACCESS_KEY_ID`, `AWS_REGION`,
//! `AWS_ENDPOINT`, `AWS_SKIP_SIGNATURE=true` for public buckets, `GOOGLE_*`, `AZURE_*`).

use datafusion::error::{DataFusionError, Result};
use datafusion::execution::object_store::{DefaultObjectStoreRegistry, ObjectStoreRegistry};
use object_store::ObjectStore;
use std::sync::Arc;
use url::Url;

/// The default registry (local files, stores registered by hand), which creates the store
/// of a cloud or HTTP URL on first use.
#[derive(Debug, Default)]
pub struct RemoteStores {
    inner: DefaultObjectStoreRegistry,
}

/// Environment variables that configure the stores (their lower-cased names are the
/// builders' configuration keys; the others are ignored).
const PREFIXES: [&str; 4] = ["AWS_", "GOOGLE_", "AZURE_", "OBJECT_STORE_"];

impl ObjectStoreRegistry for RemoteStores {
    fn register_store(
        &self,
        url: &Url,
        store: Arc<dyn ObjectStore>,
    ) -> Option<Arc<dyn ObjectStore>> {
        self.inner.register_store(url, store)
    }

    fn deregister_store(&self, url: &Url) -> Result<Arc<dyn ObjectStore>> {
        self.inner.deregister_store(url)
    }

    fn get_store(&self, url: &Url) -> Result<Arc<dyn ObjectStore>> {
        if let Ok(store) = self.inner.get_store(url) {
            return Ok(store);
        }
        let remote = matches!(
            url.scheme(),
            "s3" | "s3a" | "gs" | "az" | "adl" | "azure" | "abfs" | "abfss" | "http" | "https"
        );
        if !remote {
            return self.inner.get_store(url);
        }
        let mut env: Vec<(String, String)> = std::env::vars()
            .filter(|(k, _)| PREFIXES.iter().any(|p| k.starts_with(p)))
            .map(|(k, v)| (k.to_ascii_lowercase(), v))
            .collect();
        // A plain `http://` URL is the user's choice of an unencrypted store.
        if url.scheme() == "http" {
            env.push(("allow_http".into(), "true".into()));
        }
        let (store, _) = object_store::parse_url_opts(url, env)
            .map_err(|e| DataFusionError::Configuration(format!("{url}: {e}")))?;
        let store: Arc<dyn ObjectStore> = Arc::from(store);
        let base = Url::parse(&url[..url::Position::BeforePath])
            .map_err(|e| DataFusionError::Configuration(format!("{url}: {e}")))?;
        self.inner.register_store(&base, Arc::clone(&store));
        Ok(store)
    }
}
