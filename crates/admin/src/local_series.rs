//! A worker thread's own handles on the series of a metric family it has used lately.
//!
//! `Family::get_or_create` hashes the label set and takes the family's lock, which every worker
//! shares: on a per-handshake path that is a process-wide lock per handshake. [`LocalSeries`]
//! keeps, per thread, the few label sets that thread has seen with a handle on each series:
//! finding one compares label sets (a handful of `&'static str`, equal pointers compare at
//! once) and touches nothing other workers write, except the series' own atomic counter.

use prometheus_client::metrics::family::{Family, MetricConstructor};

/// Label sets a thread keeps per family before it starts over (a bound on memory when labels
/// vary more than expected; a cleared cache only costs one `get_or_create` per label set).
const KEPT: usize = 64;

/// A thread's recently used series of families of labels `L` and metric `M`. Put it in a
/// `thread_local!` (`RefCell<LocalSeries<L, M>>`), one per family type.
#[derive(Debug)]
pub struct LocalSeries<L, M> {
    /// ((metric set, family address), labels, handle).
    kept: Vec<((u64, usize), L, M)>,
}

impl<L, M> Default for LocalSeries<L, M> {
    fn default() -> Self {
        Self { kept: Vec::new() }
    }
}

impl<L, M> LocalSeries<L, M>
where
    L: Clone + Eq + std::hash::Hash,
    M: Clone,
{
    /// The series of `family` with `labels`: this thread's handle when it has one, else the
    /// family's (kept for next time). Families are told apart by their metric set's `instance`
    /// number and their address, so two gateways in one process (tests) never share a series,
    /// even when a later one is allocated where an earlier one was.
    pub fn get<C: MetricConstructor<M>>(&mut self, instance: u64, family: &Family<L, M, C>, labels: &L) -> &M {
        let id = (instance, std::ptr::from_ref(family) as usize);
        if let Some(i) = self.kept.iter().position(|(f, l, _)| *f == id && l == labels) {
            return &self.kept[i].2;
        }
        if self.kept.len() >= KEPT {
            self.kept.clear();
        }
        let series = family.get_or_create(labels).clone();
        self.kept.push((id, labels.clone(), series));
        &self.kept[self.kept.len() - 1].2
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::metrics::counter::Counter;

    #[derive(Clone, Debug, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
    struct Labels {
        site: &'static str,
    }

    #[test]
    fn a_kept_handle_counts_into_the_family_series() {
        let family = Family::<Labels, Counter>::default();
        let other = Family::<Labels, Counter>::default();
        let mut local = LocalSeries::default();
        for _ in 0..3 {
            local.get(1, &family, &Labels { site: "a" }).inc();
        }
        local.get(1, &family, &Labels { site: "b" }).inc();
        local.get(1, &other, &Labels { site: "a" }).inc();
        assert_eq!(family.get_or_create(&Labels { site: "a" }).get(), 3);
        assert_eq!(family.get_or_create(&Labels { site: "b" }).get(), 1);
        assert_eq!(
            other.get_or_create(&Labels { site: "a" }).get(),
            1,
            "families kept apart"
        );
        assert_eq!(local.kept.len(), 3);
    }

    #[test]
    fn the_cache_is_bounded() {
        let family = Family::<Labels, Counter>::default();
        let names: Vec<&'static str> = (0..KEPT + 5)
            .map(|i| &*Box::leak(i.to_string().into_boxed_str()))
            .collect();
        let mut local = LocalSeries::default();
        for n in &names {
            local.get(1, &family, &Labels { site: n }).inc();
        }
        assert!(local.kept.len() <= KEPT);
        assert_eq!(family.get_or_create(&Labels { site: names[0] }).get(), 1);
    }
}
