//! Re-writes finished ttlb-pq runs' summaries (cells, `ttlb-pq.md`, SVG figures) from their own
//! samples with the current report code: `cargo run --release -p tlsgate-lab --example
//! ttlb_pq_rerender -- docs/lab/fig1 docs/lab/fig4 ...`. Runs nothing; needs no root.

fn main() -> anyhow::Result<()> {
    for dir in std::env::args().skip(1) {
        let cells = tlsgate_lab::exp::ttlb_pq::rerender(std::path::Path::new(&dir))?;
        println!("{dir}: {} cells", cells.len());
    }
    Ok(())
}
