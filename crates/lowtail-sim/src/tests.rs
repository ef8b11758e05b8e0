//! Known answers: deterministic queues worked out by hand, and M/M/1 / M/D/1 closed forms.

use crate::irq::InterruptTimeline;
use crate::{simulate, ArrivalKind, InterruptSpec, Service, SimSpec};

fn constant(ns: f64) -> Service {
    Service::Constant { ns }
}

/// Nearest-rank quantile of sorted values (percentile_disc).
fn quantile(sorted: &[i64], q: f64) -> i64 {
    let r = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[r - 1]
}

#[test]
fn light_load_latency_is_service_plus_base() {
    let spec = SimSpec {
        packets: 1000,
        rate_pps: 100_000.0,
        service: constant(2_000.0),
        base_latency_ns: 3_100,
        ..Default::default()
    };
    let r = simulate(&spec).unwrap();
    assert_eq!(r.dropped, 0);
    assert!(r.latencies().iter().all(|&l| l == 5_100));
    assert_eq!(r.batches, 1000);
}

#[test]
fn overload_without_a_queue_limit_grows_linearly() {
    // Service 12 µs, arrivals every 10 µs: packet i leaves at (i+1)·12 µs.
    let spec = SimSpec { packets: 500, rate_pps: 100_000.0, service: constant(12_000.0), ..Default::default() };
    let r = simulate(&spec).unwrap();
    for (i, l) in r.latencies().iter().enumerate() {
        assert_eq!(*l, (i as i64 + 1) * 12_000 - i as i64 * 10_000, "packet {i}");
    }
}

#[test]
fn full_queue_drops_the_excess() {
    // Offered 100 kpps, served 1/12 µs = 83.3 kpps: a sixth is lost once the queue is full,
    // and the waiting time settles at queue capacity × service time.
    let spec = SimSpec {
        packets: 120_000,
        rate_pps: 100_000.0,
        service: constant(12_000.0),
        queue_capacity: 64,
        ..Default::default()
    };
    let r = simulate(&spec).unwrap();
    let loss = r.dropped as f64 / spec.packets as f64;
    assert!((loss - 1.0 / 6.0).abs() < 0.002, "loss {loss}");
    let lat = r.latencies();
    let tail = &lat[lat.len() - 1000..];
    // In steady state a packet waits for the 64 ahead of it, ± one service time.
    assert!(tail.iter().all(|&l| (64 * 12_000..=66 * 12_000).contains(&l)), "{:?}", &tail[..5]);
}

#[test]
fn burst_larger_than_batch_leaves_in_two_steps() {
    // 64 packets back to back, batch 32, 1 µs each: the URLLC studies' two-step staircase.
    let spec = SimSpec {
        packets: 64 * 10,
        rate_pps: 64.0 * 1_000.0,
        burst: 64,
        service: constant(1_000.0),
        batch: 32,
        ..Default::default()
    };
    let r = simulate(&spec).unwrap();
    let lat = r.latencies();
    for burst in lat.chunks(64) {
        assert!(burst[..32].iter().all(|&l| l == 32_000));
        assert!(burst[32..].iter().all(|&l| l == 64_000));
    }
    assert_eq!(r.batches, 20);
}

#[test]
fn batch_holds_early_packets_until_the_last_is_done() {
    // Burst of 8 packets 100 ns apart, 1 µs each, batch 32: the first poll finds one
    // packet; the other seven wait for it and then leave together at 8 µs.
    let spec = SimSpec {
        packets: 8,
        rate_pps: 1_000.0,
        burst: 8,
        burst_gap_ns: 100.0,
        service: constant(1_000.0),
        batch: 32,
        ..Default::default()
    };
    let r = simulate(&spec).unwrap();
    let expected: Vec<i64> = (0..8).map(|k| if k == 0 { 1_000 } else { 8_000 - 100 * k }).collect();
    assert_eq!(r.latencies(), expected);
    assert_eq!(r.batches, 2);
}

#[test]
fn periodic_interrupt_delays_the_packet_it_hits() {
    // 10 kpps against a 250 Hz tick: every 40th packet lands on the tick and waits 8.2 µs.
    let spec = SimSpec {
        packets: 4_000,
        rate_pps: 10_000.0,
        service: constant(1_000.0),
        interrupts: vec![InterruptSpec { rate_hz: 250.0, durations_ns: vec![8_200], phase_ns: 0, poisson: false }],
        ..Default::default()
    };
    let r = simulate(&spec).unwrap();
    for (i, l) in r.latencies().iter().enumerate() {
        assert_eq!(*l, if i % 40 == 0 { 9_200 } else { 1_000 }, "packet {i}");
    }
}

#[test]
fn interrupt_preempts_work_in_progress() {
    let spec = [InterruptSpec { rate_hz: 1.0, durations_ns: vec![300], phase_ns: 500, poisson: false }];
    let mut t = InterruptTimeline::new(&spec, 1);
    assert_eq!(t.finish(0, 1_000), 1_300);
    // A fresh timeline: time only moves forward in one.
    let mut t = InterruptTimeline::new(&spec, 1);
    assert_eq!(t.available(600), 800);
    assert_eq!(t.available(900), 900);
}

#[test]
fn overlapping_interrupts_run_one_after_the_other() {
    let spec = [
        InterruptSpec { rate_hz: 1.0, durations_ns: vec![300], phase_ns: 500, poisson: false },
        InterruptSpec { rate_hz: 1.0, durations_ns: vec![200], phase_ns: 600, poisson: false },
    ];
    let mut t = InterruptTimeline::new(&spec, 1);
    assert_eq!(t.available(500), 1_000);
    assert_eq!(t.finish(0, 1_000), 1_500);
}

#[test]
fn mm1_sojourn_time_is_exponential() {
    // M/M/1 with λ = 0.5/µs, μ = 1/µs: sojourn ~ Exp(μ − λ), quantile −ln(1−q)/(μ−λ).
    let spec = SimSpec {
        packets: 400_000,
        rate_pps: 500_000.0,
        arrivals: ArrivalKind::Poisson,
        service: Service::Exponential { mean_ns: 1_000.0 },
        seed: 7,
        ..Default::default()
    };
    let mut lat = simulate(&spec).unwrap().latencies();
    lat.sort_unstable();
    for q in [0.5, 0.9, 0.99] {
        let expected = -(1.0f64 - q).ln() / 0.5e-3;
        let got = quantile(&lat, q) as f64;
        assert!((got / expected - 1.0).abs() < 0.04, "q {q}: {got} vs {expected}");
    }
}

#[test]
fn md1_mean_waiting_time_follows_pollaczek_khinchine() {
    // M/D/1, ρ = 0.8, service 1 µs: mean sojourn = s + ρ·s / (2(1−ρ)) = 3 µs.
    let spec = SimSpec {
        packets: 400_000,
        rate_pps: 800_000.0,
        arrivals: ArrivalKind::Poisson,
        service: constant(1_000.0),
        seed: 3,
        ..Default::default()
    };
    let lat = simulate(&spec).unwrap().latencies();
    let mean = lat.iter().sum::<i64>() as f64 / lat.len() as f64;
    assert!((mean / 3_000.0 - 1.0).abs() < 0.05, "mean {mean}");
}

#[test]
fn bad_specs_are_refused_with_a_reason() {
    let e = simulate(&SimSpec { batch: 0, ..Default::default() }).unwrap_err().to_string();
    assert!(e.contains("batch"), "{e}");
    let e = simulate(&SimSpec { rate_pps: -1.0, ..Default::default() }).unwrap_err().to_string();
    assert!(e.contains("rate_pps"), "{e}");
    let spec = SimSpec {
        interrupts: vec![InterruptSpec { rate_hz: 1e6, durations_ns: vec![2_000], ..Default::default() }],
        ..Default::default()
    };
    assert!(simulate(&spec).unwrap_err().to_string().contains("no time"));
    let json = r#"{"packets": 10, "servce": {"kind": "constant", "ns": 5}}"#;
    assert!(serde_json::from_str::<SimSpec>(json).is_err(), "a misspelt key must not pass");
}

#[test]
fn a_spec_that_would_allocate_without_bound_is_refused() {
    let spec = SimSpec { packets: crate::spec::MAX_PACKETS + 1, ..Default::default() };
    let Err(err) = simulate(&spec) else { panic!("a spec above MAX_PACKETS must be refused") };
    assert!(err.to_string().contains("packets must be at most"), "{err}");
}
