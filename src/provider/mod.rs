//! L5: DataFusion. The only module that names DataFusion types: the table provider and its
//! scan, filter pushdown, `STORED AS BLOSC2`, and the `SessionContext` extension.

pub mod aggregate;
pub mod computed;
pub mod dynamic;
pub mod exec;
pub mod format;
mod in_order_union;
mod index_lookup;
mod listed;
mod member_value;
pub mod members;
pub mod multi;
pub mod numexpr_functions;
mod numpy_functions;
mod numpy_mode;
pub mod numpy_types;
mod opener;
pub mod partition;
pub mod prune;
pub mod pushdown;
pub mod session;
pub mod source;
pub mod table;
mod text_filters;
mod work;
mod wrapping_cast;
pub mod zone_maps;

pub use aggregate::{Blosc2AggregateExec, Blosc2AggregatePushdown};
pub use exec::Blosc2Exec;
pub use format::{Blosc2Format, Blosc2FormatFactory};
pub use members::member_locations;
pub use multi::{Blosc2MultiTable, FILENAME_COLUMN};
pub use session::{
    Blosc2Options, Blosc2SessionExt, Blosc2TableFactory, Blosc2UrlTableFactory, open_provider,
    resolve_location,
};
pub use source::Blosc2Source;
pub use table::Blosc2Table;

use datafusion::error::DataFusionError;

/// Wraps a crate error for DataFusion (keeps it as the source).
pub fn to_df(e: crate::Error) -> DataFusionError {
    DataFusionError::External(Box::new(e))
}
