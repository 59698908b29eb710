//! Running per-node work in parallel, bounded by the configured `parallelism`.
//!
//! Upstream: pkg/scheduler/framework/parallelize. One rayon pool per scheduler; work is cut
//! into chunks of about √n pieces so that the pool's overhead is paid per chunk, not per node.

use std::sync::Arc;

/// A bounded pool for Filter/Score fan-out.
#[derive(Clone)]
pub struct Parallelizer {
    pool: Option<Arc<rayon::ThreadPool>>,
    parallelism: usize,
}

impl std::fmt::Debug for Parallelizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Parallelizer")
            .field("parallelism", &self.parallelism)
            .finish()
    }
}

impl Parallelizer {
    /// A pool of `min(parallelism, available cores)` threads: threads beyond the cores only
    /// add switching, since the work is CPU-bound. `parallelism <= 1` runs inline.
    pub fn new(parallelism: usize) -> Self {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let threads = parallelism.min(cores).max(1);
        let pool = if threads > 1 {
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .thread_name(|i| format!("kubesched-worker-{i}"))
                .build()
                .ok()
                .map(Arc::new)
        } else {
            None
        };
        Parallelizer {
            pool,
            parallelism: parallelism.max(1),
        }
    }

    /// A parallelizer that runs everything on the calling thread.
    pub fn sequential() -> Self {
        Parallelizer {
            pool: None,
            parallelism: 1,
        }
    }

    /// The configured parallelism.
    pub fn parallelism(&self) -> usize {
        self.parallelism
    }

    /// Threads actually used.
    pub fn threads(&self) -> usize {
        self.pool.as_ref().map_or(1, |p| p.current_num_threads())
    }

    /// Upstream's chunk size: √n, at most n/parallelism + 1, at least 1.
    pub fn chunk_size(&self, pieces: usize) -> usize {
        let s = (pieces as f64).sqrt() as usize;
        s.min(pieces / self.parallelism + 1).max(1)
    }

    /// Runs `work(start..end)` over `0..pieces` cut into chunks, in parallel; returns the
    /// results in chunk order. Small inputs or a sequential parallelizer run inline.
    pub fn map_chunks<R, F>(&self, pieces: usize, work: F) -> Vec<R>
    where
        R: Send,
        F: Fn(std::ops::Range<usize>) -> R + Sync + Send,
    {
        self.map_chunks_from(pieces, 0, work)
    }

    /// Like [`map_chunks`](Self::map_chunks), but runs on the calling thread when
    /// `pieces < min_parallel`: for cheap per-piece work, waking the pool costs more than
    /// it saves.
    pub fn map_chunks_from<R, F>(&self, pieces: usize, min_parallel: usize, work: F) -> Vec<R>
    where
        R: Send,
        F: Fn(std::ops::Range<usize>) -> R + Sync + Send,
    {
        let chunk = self.chunk_size(pieces);
        let ranges = (0..pieces)
            .step_by(chunk)
            .map(move |s| s..(s + chunk).min(pieces));
        match &self.pool {
            Some(pool) if pieces > chunk && pieces >= min_parallel => {
                use rayon::prelude::*;
                let ranges: Vec<_> = ranges.collect();
                pool.install(|| ranges.into_par_iter().map(&work).collect())
            }
            _ => ranges.map(work).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case::one(1, 16, 1)]
    #[case::hundred(100, 16, 7)]
    #[case::five_thousand(5000, 16, 70)]
    #[case::few_workers(100, 2, 10)]
    fn chunk_sizes(#[case] pieces: usize, #[case] parallelism: usize, #[case] want: usize) {
        let p = Parallelizer {
            pool: None,
            parallelism,
        };
        assert_eq!(p.chunk_size(pieces), want);
    }

    #[test]
    fn map_chunks_covers_every_piece_once_in_order() {
        let p = Parallelizer::new(4);
        let sums: Vec<Vec<usize>> = p.map_chunks(1000, |r| r.collect());
        let flat: Vec<usize> = sums.into_iter().flatten().collect();
        assert_eq!(flat, (0..1000).collect::<Vec<_>>());
    }
}
