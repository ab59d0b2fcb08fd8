//! Accuracy of the link emulator with real packets (needs root: namespaces and TUN devices):
//! RTT against the configured delay, bulk TCP goodput against the configured rate, loss against
//! the binomial bound, and cleanup of namespaces on drop and on panic.
//!
//! The timing tests take a process-wide lock so they do not disturb each other on a small
//! machine; each prints what it measured (`--nocapture`).

use std::sync::Mutex;
use tlsgate_lab::measure::{median, tcp_goodput, tcp_rtts, udp_delivered};
use tlsgate_lab::{netns, Dist, Lab, LinkSpec, Loss};

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

#[test]
fn rtt_matches_configured_delay() {
    let _g = serial();
    let lab = Lab::new(LinkSpec::default(), LinkSpec::default()).unwrap();
    for one_way_ms in [0.0, 1.0, 10.0, 50.0] {
        lab.set_symmetric(LinkSpec::delay(one_way_ms)).unwrap();
        let samples = if one_way_ms >= 50.0 { 30 } else { 100 };
        let rtts = tcp_rtts(&lab, samples, 3).unwrap();
        let want = 2.0 * one_way_ms;
        let got = median(&rtts);
        let tol = (0.05 * want).max(0.5);
        println!(
            "configured RTT {want} ms: median {got:.3} ms (min {:.3}) over {samples}",
            rtts.iter().cloned().fold(f64::MAX, f64::min)
        );
        assert!(
            (got - want).abs() <= tol,
            "RTT {got:.3} ms, configured {want} ms (±{tol:.2})"
        );
    }
}

#[test]
fn paretonormal_jitter_has_the_configured_spread() {
    let _g = serial();
    // 35 ms ± 35/4 ms one way (the paper's jitter), FIFO.
    let spec = LinkSpec::delay(35.0 / 2.0).with_jitter(35.0 / 8.0, Dist::Paretonormal);
    let lab = Lab::new(spec.clone(), spec).unwrap();
    let rtts = tcp_rtts(&lab, 150, 2).unwrap();
    // Expected RTT distribution: the sum of two independent one-way draws.
    let mut rng = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(5);
    let sim: Vec<f64> = (0..100_000)
        .map(|_| Dist::Paretonormal.sample(&mut rng, 17.5, 4.375) + Dist::Paretonormal.sample(&mut rng, 17.5, 4.375))
        .collect();
    let (got, want) = (median(&rtts), median(&sim));
    println!("paretonormal RTT median {got:.2} ms, expected {want:.2} ms");
    assert!((got - want).abs() <= (0.05 * want).max(0.5), "{got} vs {want}");
    let spread = |v: &[f64]| tlsgate_lab::measure::percentile(v, 90.0) - tlsgate_lab::measure::percentile(v, 10.0);
    assert!(
        spread(&rtts) > 0.5 * spread(&sim),
        "no jitter: {} vs {}",
        spread(&rtts),
        spread(&sim)
    );
}

#[test]
fn bulk_throughput_matches_rate() {
    let _g = serial();
    let lab = Lab::new(LinkSpec::default(), LinkSpec::default()).unwrap();
    for mbps in [10u64, 50] {
        let spec = LinkSpec::delay(5.0).with_rate(mbps * 1_000_000);
        lab.set_symmetric(spec).unwrap();
        let (before, _) = lab.stats();
        let got = tcp_goodput(&lab, 4.0, 1.0).unwrap();
        let (after, _) = lab.stats();
        let d = after.since(&before);
        let ratio = got / (mbps as f64 * 1e6);
        println!(
            "rate {mbps} Mbit/s: TCP goodput {:.2} Mbit/s ({:.1}%), {} packets, {} queue drops",
            got / 1e6,
            ratio * 100.0,
            d.tx_packets,
            d.queue_drops
        );
        assert!(
            (0.9..=1.1).contains(&ratio),
            "goodput {:.2} Mbit/s at {mbps} Mbit/s",
            got / 1e6
        );
    }
}

#[test]
fn loss_within_binomial_bound() {
    let _g = serial();
    let lab = Lab::new(LinkSpec::default(), LinkSpec::default()).unwrap();
    let n = 20_000usize;
    for p in [0.01, 0.03, 0.10] {
        lab.set_symmetric(LinkSpec::delay(1.0).with_loss(p)).unwrap();
        let got = udp_delivered(&lab, n, 200).unwrap();
        let lost = (n - got) as f64;
        let (mean, sd) = (n as f64 * p, (n as f64 * p * (1.0 - p)).sqrt());
        println!("loss {p}: {lost} of {n} lost (expected {mean:.0} ± {sd:.1})");
        assert!(
            (lost - mean).abs() <= 4.0 * sd,
            "lost {lost}, expected {mean} ± 4×{sd:.1}"
        );
    }
    // Gilbert-Elliott: bursts make the count over-dispersed; check the long-run mean loosely.
    let ge = Loss::GilbertElliott {
        p: 0.02,
        r: 0.25,
        loss_bad: 0.5,
        loss_good: 0.0,
    };
    lab.set_symmetric(LinkSpec {
        delay_ms: 1.0,
        loss: ge,
        ..LinkSpec::default()
    })
    .unwrap();
    let got = udp_delivered(&lab, n, 200).unwrap();
    let rate = (n - got) as f64 / n as f64;
    println!("Gilbert-Elliott: loss {rate:.4}, model mean {:.4}", ge.mean());
    assert!((rate - ge.mean()).abs() <= 0.3 * ge.mean(), "{rate} vs {}", ge.mean());
}

#[test]
fn namespaces_removed_on_drop_and_on_panic() {
    let lab = Lab::new(LinkSpec::default(), LinkSpec::default()).unwrap();
    let (a, b) = (lab.a.name().to_string(), lab.b.name().to_string());
    assert!(netns::list().contains(&a) && netns::list().contains(&b));
    drop(lab);
    assert!(!netns::list().contains(&a) && !netns::list().contains(&b));

    let names = std::panic::catch_unwind(|| {
        let lab = Lab::new(LinkSpec::delay(1.0), LinkSpec::delay(1.0)).unwrap();
        let n = (lab.a.name().to_string(), lab.b.name().to_string());
        std::panic::panic_any(n);
    })
    .unwrap_err();
    let (a, b) = names.downcast_ref::<(String, String)>().unwrap();
    assert!(
        !netns::list().contains(a) && !netns::list().contains(b),
        "{a} {b} left behind"
    );
}

#[test]
fn parallel_labs_do_not_collide() {
    let labs: Vec<Lab> = (0..3)
        .map(|_| Lab::new(LinkSpec::default(), LinkSpec::default()).unwrap())
        .collect();
    let mut ids: Vec<&str> = labs.iter().map(|l| l.id()).collect();
    ids.dedup();
    assert_eq!(ids.len(), 3);
    for lab in &labs {
        assert!(tcp_rtts(lab, 3, 0).unwrap().len() == 3);
    }
}
