//! The members of a multi-file table scanned in order ([`super::Blosc2Options::in_order`]):
//! the partitions of several plans as one partition, one after another. A few inputs
//! run ahead of the one being handed out, each in a spawned task that fills a small
//! bounded channel, so a member's start (opening its first chunks) overlaps the end of
//! the one before it and memory stays bounded.

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use datafusion::common::runtime::SpawnedTask;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, Distribution, ExecutionPlan, Partitioning, PlanProperties,
};
use futures::StreamExt;
use std::fmt;
use std::sync::Arc;
use tokio::sync::mpsc;

/// Batches an input that runs ahead may hold before it waits for the consumer.
const CHANNEL_BATCHES: usize = 2;

/// Its inputs' partitions, input by input and partition by partition, as one partition.
#[derive(Debug, Clone)]
pub struct InOrderUnionExec {
    inputs: Vec<Arc<dyn ExecutionPlan>>,
    /// Inputs running at once (the one handed out and those ahead of it).
    running: usize,
    props: Arc<PlanProperties>,
}

impl InOrderUnionExec {
    /// The union of `inputs` (at least one, all of `schema`), with up to `running` of
    /// their partitions running at once.
    pub fn new(schema: SchemaRef, inputs: Vec<Arc<dyn ExecutionPlan>>, running: usize) -> Self {
        let props = Arc::new(PlanProperties::new(
            EquivalenceProperties::new(schema),
            Partitioning::UnknownPartitioning(1),
            EmissionType::Incremental,
            Boundedness::Bounded,
        ));
        InOrderUnionExec {
            inputs,
            running: running.max(1),
            props,
        }
    }
}

impl DisplayAs for InOrderUnionExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "InOrderUnionExec: inputs={}, running={}",
            self.inputs.len(),
            self.running
        )
    }
}

impl ExecutionPlan for InOrderUnionExec {
    fn name(&self) -> &str {
        "InOrderUnionExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.props
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        self.inputs.iter().collect()
    }

    // No expressions of its own.
    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    // Each input is read as it is: repartitioning one would interleave its rows.
    fn required_input_distribution(&self) -> Vec<Distribution> {
        vec![Distribution::UnspecifiedDistribution; self.inputs.len()]
    }

    fn benefits_from_input_partitioning(&self) -> Vec<bool> {
        vec![false; self.inputs.len()]
    }

    fn maintains_input_order(&self) -> Vec<bool> {
        vec![true; self.inputs.len()]
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if children.len() != self.inputs.len() {
            return Err(DataFusionError::Internal(format!(
                "InOrderUnionExec has {} inputs, given {}",
                self.inputs.len(),
                children.len()
            )));
        }
        Ok(Arc::new(InOrderUnionExec {
            inputs: children,
            ..(*self).clone()
        }))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        if partition != 0 {
            return Err(DataFusionError::Internal(format!(
                "InOrderUnionExec has one partition, asked for {partition}"
            )));
        }
        let parts: Vec<(Arc<dyn ExecutionPlan>, usize)> = self
            .inputs
            .iter()
            .flat_map(|p| {
                let n = p.properties().output_partitioning().partition_count();
                (0..n).map(move |k| (Arc::clone(p), k))
            })
            .collect();
        // `buffered` starts the next `running - 1` parts while one is handed out.
        let batches = futures::stream::iter(parts)
            .map(move |(plan, k)| futures::future::ready(run_ahead(plan, k, Arc::clone(&context))))
            .buffered(self.running)
            .flat_map(drain);
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            self.props.eq_properties.schema().clone(),
            batches,
        )))
    }
}

/// A partition running in a spawned task into a bounded channel.
struct Ahead {
    rx: mpsc::Receiver<Result<RecordBatch>>,
    task: SpawnedTask<()>,
}

/// Starts partition `k` of `plan`.
fn run_ahead(plan: Arc<dyn ExecutionPlan>, k: usize, context: Arc<TaskContext>) -> Ahead {
    let (tx, rx) = mpsc::channel(CHANNEL_BATCHES);
    let task = SpawnedTask::spawn(async move {
        let mut stream = match plan.execute(k, context) {
            Ok(s) => s,
            Err(e) => {
                let _ = tx.send(Err(e)).await;
                return;
            }
        };
        while let Some(b) = stream.next().await {
            let failed = b.is_err();
            // The consumer went away (a LIMIT was reached, or the query was dropped).
            if tx.send(b).await.is_err() || failed {
                return;
            }
        }
    });
    Ahead { rx, task }
}

/// The batches of a partition that runs ahead, then an error if its task panicked (its
/// channel closes early then, and the rows it had not sent would be missing silently).
fn drain(ahead: Ahead) -> futures::stream::BoxStream<'static, Result<RecordBatch>> {
    futures::stream::unfold(Some(ahead), |state| async move {
        let mut ahead = state?;
        match ahead.rx.recv().await {
            Some(b) => Some((b, Some(ahead))),
            None => match ahead.task.join().await {
                Ok(()) => None,
                Err(e) => Some((Err(DataFusionError::External(Box::new(e))), None)),
            },
        }
    })
    .boxed()
}
