//! Accuracy of the link emulator with real packets (needs root: namespaces and TUN devices).
//!
//! What is asserted is what the emulator controls: the delay, jitter and rate decisions it makes
//! for every packet, the queue it keeps, the loss it draws, and how late its writer delivers
//! (read from the packet tap). Margins for timing come from noise measured in the same test on
//! this host (how late a thread wakes from short sleeps; the RTT at zero delay), never from fixed
//! figures that assume a fast machine. End-to-end TCP RTT is checked as a lower bound (the
//! emulator never delivers early) plus the measured overhead; TCP goodput is checked never to
//! exceed the configured rate. How close TCP goodput comes to the rate on a given host is a
//! measurement, reported by `tlsgate lab calibrate` (docs/LAB.md), not a test.
//!
//! The timing tests take a process-wide lock so they do not disturb each other on a small
//! machine; each prints what it measured (`--nocapture`).

use std::sync::Mutex;
use tlsgate_lab::forward::{CapDir, Capture};
use tlsgate_lab::measure::{median, percentile, tcp_goodput, tcp_rtts, udp_delivered, udp_offer, wake_noise};
use tlsgate_lab::{netns, Dist, Lab, LinkSpec, Loss};

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// The largest lateness (s) tolerated at the 90th percentile of delivered packets, given the
/// host's wake-up noise measured around the run: four times the noise's p99, and never under
/// 500 µs (on an idle host the writer is ~0.1 ms late: a condition variable, a lock and a
/// write(2) on top of a plain sleep's wake-up). A writer that sleeps past its deadline, or
/// schedules in wrong units, is late by milliseconds and fails.
fn late_margin((_, p99): (f64, f64)) -> f64 {
    (4.0 * p99).max(500e-6)
}

/// The worse of two noise readings (taken before and after a run).
fn worse(a: (f64, f64), b: (f64, f64)) -> (f64, f64) {
    (a.0.max(b.0), a.1.max(b.1))
}

fn field(cap: &Capture, f: impl Fn(&tlsgate_lab::forward::CapturedPacket) -> f64) -> Vec<f64> {
    cap.packets.iter().map(f).collect()
}

#[test]
fn delays_are_scheduled_exactly_and_delivered_on_time() {
    let _g = serial();
    let lab = Lab::new(LinkSpec::default(), LinkSpec::default()).unwrap();
    lab.start_capture();
    let rtt0 = tcp_rtts(&lab, 100, 3).unwrap();
    let _ = lab.take_capture();
    let (rtt0_med, rtt0_p90) = (median(&rtt0), percentile(&rtt0, 90.0));
    println!("RTT at zero delay: median {rtt0_med:.3} ms, p90 {rtt0_p90:.3} ms");
    for one_way_ms in [1.0, 10.0, 50.0] {
        lab.set_symmetric(LinkSpec::delay(one_way_ms)).unwrap();
        let noise = wake_noise(100);
        lab.start_capture();
        let samples = if one_way_ms >= 50.0 { 30 } else { 100 };
        let rtts = tcp_rtts(&lab, samples, 3).unwrap();
        let cap = lab.take_capture();
        let noise = worse(noise, wake_noise(100));
        assert!(
            cap.packets.len() >= 2 * samples,
            "tap saw {} packets",
            cap.packets.len()
        );
        // The decision: every packet is held exactly the configured delay (ns rounding).
        for p in &cap.packets {
            assert!(
                (p.scheduled - one_way_ms / 1e3).abs() < 2e-6,
                "packet scheduled for {:.6} s at a {one_way_ms} ms delay",
                p.scheduled
            );
        }
        // The delivery: how late the writer was, against this host's own wake-up noise.
        let late = field(&cap, |p| p.late);
        let (late_med, late_p90) = (median(&late), percentile(&late, 90.0));
        let margin = late_margin(noise);
        println!(
            "one-way {one_way_ms} ms: writer late by median {:.1} µs, p90 {:.1} µs (host wake noise p50 {:.1} µs, p99 {:.1} µs; margin {:.1} µs)",
            late_med * 1e6,
            late_p90 * 1e6,
            noise.0 * 1e6,
            noise.1 * 1e6,
            margin * 1e6
        );
        assert!(
            late_p90 <= margin,
            "writer late by {late_p90:.6} s at p90 (margin {margin:.6} s)"
        );
        // End to end: never faster than configured, and slower only by what the stacks cost at
        // zero delay plus the writer's lateness in both directions.
        let want = 2.0 * one_way_ms;
        let got = median(&rtts);
        let slack = rtt0_p90 + 2.0 * late_p90 * 1e3 + 0.2;
        println!(
            "configured RTT {want} ms: median {got:.3} ms over {samples} (allowed {want} ..= {:.3})",
            want + slack
        );
        assert!(
            rtts.iter().all(|&r| r >= want),
            "an RTT below the configured {want} ms: {rtts:?}"
        );
        assert!(
            got - want <= slack,
            "RTT {got:.3} ms, configured {want} ms (+{slack:.3} allowed)"
        );
    }
}

#[test]
fn paretonormal_jitter_decisions_have_the_configured_spread() {
    let _g = serial();
    // 35 ms ± 35/4 ms one way (the paper's jitter), FIFO.
    let spec = LinkSpec::delay(35.0 / 2.0).with_jitter(35.0 / 8.0, Dist::Paretonormal);
    let lab = Lab::new(spec.clone(), spec).unwrap();
    let noise = wake_noise(100);
    lab.start_capture();
    let rtts = tcp_rtts(&lab, 150, 2).unwrap();
    let cap = lab.take_capture();
    let noise = worse(noise, wake_noise(100));
    // The emulator's draws, read back per packet, against the distribution itself.
    let mut rng = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(5);
    let one_way: Vec<f64> = (0..100_000)
        .map(|_| Dist::Paretonormal.sample(&mut rng, 17.5, 4.375))
        .collect();
    let drawn = field(&cap, |p| p.scheduled * 1e3);
    let spread = |v: &[f64]| percentile(v, 90.0) - percentile(v, 10.0);
    let (got, want) = (median(&drawn), median(&one_way));
    println!(
        "paretonormal one-way: median {got:.2} ms (expected {want:.2}), p10–p90 {:.2} ms (expected {:.2}) over {} packets",
        spread(&drawn),
        spread(&one_way),
        drawn.len()
    );
    assert!(drawn.len() >= 300, "tap saw {} packets", drawn.len());
    assert!((got - want).abs() <= 0.05 * want, "{got} vs {want}");
    let ratio = spread(&drawn) / spread(&one_way);
    assert!((0.75..=1.33).contains(&ratio), "spread {ratio:.2}× the model's");
    // Delivered on time, and the RTTs are the sum of two draws plus the measured lateness.
    let late_p90 = percentile(&field(&cap, |p| p.late), 90.0);
    assert!(late_p90 <= late_margin(noise), "writer late by {late_p90:.6} s at p90");
    let two_way: Vec<f64> = one_way.chunks(2).map(|c| c[0] + c[1]).collect();
    let (got, want) = (median(&rtts), median(&two_way));
    println!("paretonormal RTT median {got:.2} ms, expected {want:.2} ms");
    assert!(
        got >= 0.95 * want && got <= 1.05 * want + 2.0 * late_p90 * 1e3 + 0.5,
        "RTT median {got} vs {want}"
    );
}

#[test]
fn rate_limit_paces_departures_and_bounds_its_queue() {
    let _g = serial();
    let lab = Lab::new(LinkSpec::default(), LinkSpec::default()).unwrap();
    let (size, queue_bytes) = (1200usize, 60_000u64);
    for mbps in [10u64, 50] {
        let rate = mbps * 1_000_000;
        let spec = LinkSpec {
            queue_bytes,
            ..LinkSpec::delay(5.0).with_rate(rate)
        };
        lab.set_symmetric(spec).unwrap();
        let noise = wake_noise(100);
        let (before, _) = lab.stats();
        lab.start_capture();
        // Offer twice the rate: the queue fills and stays full.
        let sent = udp_offer(&lab, 2 * rate, 1.5, size).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(100));
        let cap = lab.take_capture();
        let noise = worse(noise, wake_noise(100));
        let (after, _) = lab.stats();
        let d = after.since(&before);
        let pk: Vec<_> = cap.packets.iter().filter(|p| p.dir == CapDir::AToB).collect();
        assert!(pk.len() > 100, "{} packets delivered", pk.len());
        // Decisions: while backlogged, departures are exactly one serialization time apart.
        let ser = |len: usize| len as f64 * 8.0 / rate as f64;
        let departures: Vec<f64> = pk.iter().map(|p| p.t - p.late).collect();
        let mut paced = 0;
        for (w, p) in departures.windows(2).zip(pk.iter().skip(1)) {
            let queued = p.scheduled - 0.005;
            if queued > ser(p.len) + 2e-6 {
                paced += 1;
                let gap = w[1] - w[0];
                assert!(
                    (gap - ser(p.len)).abs() < 5e-6,
                    "backlogged departures {:.6} s apart, serialization {:.6} s",
                    gap,
                    ser(p.len)
                );
            }
        }
        assert!(paced > pk.len() / 2, "only {paced} of {} packets were queued", pk.len());
        // The queue: never more than queue_bytes waiting (plus the packet itself), and full.
        let max_wait = pk.iter().map(|p| p.scheduled - 0.005).fold(0.0, f64::max);
        assert!(
            max_wait <= queue_bytes as f64 * 8.0 / rate as f64 + 1e-6,
            "waited {max_wait} s"
        );
        assert!(d.queue_drops > 0, "no queue drops at twice the rate ({sent} sent)");
        // Delivery: bytes over the delivered span, against the rate, allowing the writer's
        // lateness at both ends of the span.
        let span = pk.last().unwrap().t - pk[0].t;
        let bytes: usize = pk.iter().skip(1).map(|p| p.len).sum();
        let delivered = bytes as f64 * 8.0 / span;
        let tol = 2.0 * late_margin(noise) / span + 0.01;
        println!(
            "rate {mbps} Mbit/s: delivered {:.3} Mbit/s over {span:.3} s ({paced} paced packets, {} queue drops, {sent} sent, tolerance {:.2}%)",
            delivered / 1e6,
            d.queue_drops,
            tol * 100.0
        );
        assert!(
            (delivered / rate as f64 - 1.0).abs() <= tol,
            "delivered {:.3} Mbit/s at {mbps} Mbit/s",
            delivered / 1e6
        );
        // TCP never gets more than the rate (how close it gets is `tlsgate lab calibrate`'s).
        lab.set_symmetric(LinkSpec::delay(5.0).with_rate(rate)).unwrap();
        let tcp = tcp_goodput(&lab, 2.0, 0.5).unwrap();
        println!(
            "  TCP goodput {:.2} Mbit/s (reported, bounded above by the rate)",
            tcp / 1e6
        );
        assert!(tcp > 0.0 && tcp <= 1.02 * rate as f64, "TCP goodput {tcp} at {rate}");
    }
}

/// Loss drawn by the emulator (its own counters: packets read vs dropped by the loss model), so a
/// datagram the host drops elsewhere does not count; delivery is checked to account for the rest.
#[test]
fn loss_within_binomial_bound() {
    let _g = serial();
    let lab = Lab::new(LinkSpec::default(), LinkSpec::default()).unwrap();
    let n = 20_000usize;
    let run = |spec: LinkSpec| {
        lab.set_symmetric(spec).unwrap();
        let (before, _) = lab.stats();
        let got = udp_delivered(&lab, n, 200).unwrap();
        // A stray packet of the host's own (IPv6 neighbour discovery and the like) can be in the
        // 1 ms delay line when the counters are read: give the link a moment to balance.
        let mut d = lab.stats().0.since(&before);
        for _ in 0..40 {
            if d.tx_packets + d.lost + d.queue_drops == d.rx_packets {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
            d = lab.stats().0.since(&before);
        }
        assert_eq!(d.tx_packets + d.lost + d.queue_drops, d.rx_packets, "{d:?}");
        assert!(got as u64 <= d.tx_packets, "received {got}, forwarded {}", d.tx_packets);
        (d.lost as f64, d.rx_packets as f64)
    };
    for p in [0.01, 0.03, 0.10] {
        let (lost, seen) = run(LinkSpec::delay(1.0).with_loss(p));
        let (mean, sd) = (seen * p, (seen * p * (1.0 - p)).sqrt());
        println!("loss {p}: {lost} of {seen} lost (expected {mean:.0} ± {sd:.1})");
        assert!(seen >= 0.99 * n as f64, "the emulator read only {seen} of {n}");
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
    let (lost, seen) = run(LinkSpec {
        delay_ms: 1.0,
        loss: ge,
        ..LinkSpec::default()
    });
    let rate = lost / seen;
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
