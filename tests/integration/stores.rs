//! DictStores, TreeStores (zip and directory) and EmbedStores written by python-blosc2:
//! the keys they list, every array leaf's bytes, CTable leaves' values, and the error for
//! opening a whole store as one table.

use crate::arrow_values::check_table_values;
use crate::util::{fixture, sha256_hex};
use datafusion_blosc2::container::store::LeafKind;
use datafusion_blosc2::dataset::{Dataset, OpenOptions};
use datafusion_blosc2::io::Location;
use serde_json::Value;
use std::sync::Arc;

#[tokio::test]
async fn store_leaves_match_the_writer() {
    let v: Value = crate::util::expected_json("stores.json");
    assert!(v.as_object().unwrap().len() >= 4);
    for (rel, store) in v.as_object().unwrap() {
        let loc = Location::local(fixture(rel)).unwrap();
        let want = store["keys"].as_object().unwrap();
        let got = Dataset::store_keys(&loc)
            .await
            .unwrap_or_else(|e| panic!("{rel}: {e}"));
        let got_keys: Vec<&str> = got.iter().map(|(k, _)| k.as_str()).collect();
        let want_keys: Vec<&str> = want.keys().map(String::as_str).collect();
        assert_eq!(got_keys, want_keys, "{rel}: keys");
        for (key, info) in want {
            let kind = &got.iter().find(|(k, _)| k == key).unwrap().1;
            let ds = Dataset::open_key(&loc, key, &OpenOptions::default())
                .await
                .unwrap_or_else(|e| panic!("{rel}#{key}: {e}"));
            if info["kind"] == "ctable" {
                assert_eq!(*kind, LeafKind::CTable, "{rel}#{key}");
                assert!(matches!(ds, Dataset::Table(_)), "{rel}#{key}");
                check_table_values(&format!("{rel}#{key}"), Arc::new(ds), info).await;
                continue;
            }
            assert_eq!(*kind, LeafKind::Frame, "{rel}#{key}");
            let Dataset::Array(a) = ds else {
                panic!("{rel}#{key}: not an array")
            };
            let shape: Vec<u64> = info["shape"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_u64().unwrap())
                .collect();
            assert_eq!(a.geometry.shape, shape, "{rel}#{key}");
            assert_eq!(
                a.stored_dtype.as_deref(),
                info["dtype"].as_str(),
                "{rel}#{key}"
            );
            let bytes = a.read_all().await.unwrap();
            assert_eq!(
                sha256_hex(&bytes),
                info["sha256"].as_str().unwrap(),
                "{rel}#{key}"
            );
        }
        // The whole store is not one table: the error says so and lists the keys.
        let err = Dataset::open(&loc, &OpenOptions::default())
            .await
            .expect_err(rel)
            .to_string();
        assert!(
            err.contains(store["kind"].as_str().unwrap()) && err.contains("#/key"),
            "{rel}: {err}"
        );
        let first = want.keys().next().unwrap();
        assert!(err.contains(first.as_str()), "{rel}: {err}");
        // A missing key names the keys there are.
        let err = Dataset::open_key(&loc, "/nope", &OpenOptions::default())
            .await
            .expect_err(rel)
            .to_string();
        assert!(
            err.contains("/nope") && err.contains(first.as_str()),
            "{rel}: {err}"
        );
    }
}
