//! Random models of the link: netem's delay distributions and loss models, from their definitions.
//!
//! netem draws a jittered delay as `mu + sigma * t / 8192`, `t` a random entry of a table that
//! iproute2 generates (`netem/normal.c`, `pareto.c`, `paretonormal.c`): each table is the
//! quantile function of a distribution sampled at uniform points. We evaluate the same quantile
//! functions directly at a uniform random `q`:
//! - uniform (no table): `mu + sigma * (2q - 1)`;
//! - normal: `Φ⁻¹(q)`;
//! - pareto (shape a = 3): `((1 - q)^(-1/3) - 1.5) * 4/3`, capped at `32767/8192` like the table;
//! - paretonormal: `(Φ⁻¹(q) + 3 * pareto(q)) / 4`, the same `q` for both (the table adds the two
//!   quantiles entry by entry, it is not a mixture of draws).
//!
//! A negative delay is clamped to zero. netem's correlation parameters are not modelled.

use rand::Rng;
use serde::{Deserialize, Serialize};
use tlsgate_error::{Classify, Side};

/// netem's table cap: entries are `i16` in units of 1/8192.
const TABLE_MAX: f64 = 32767.0 / 8192.0;

/// Jitter distribution (netem `distribution`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Dist {
    /// netem's default: uniform in `[mu - sigma, mu + sigma]`.
    #[default]
    Uniform,
    /// Normal.
    Normal,
    /// Pareto (shape 3), shifted and scaled as iproute2's table.
    Pareto,
    /// iproute2's paretonormal: a quarter normal, three quarters pareto (quantile sum).
    Paretonormal,
}

/// A distribution name that is none of netem's four.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown distribution {0:?} (uniform, normal, pareto, paretonormal)")]
pub struct UnknownDist(pub String);

impl Classify for UnknownDist {
    fn side(&self) -> Side {
        Side::Config
    }

    fn kind(&self) -> &'static str {
        "unknown_distribution"
    }
}

impl std::str::FromStr for Dist {
    type Err = UnknownDist;
    fn from_str(s: &str) -> Result<Self, UnknownDist> {
        match s {
            "uniform" => Ok(Dist::Uniform),
            "normal" => Ok(Dist::Normal),
            "pareto" => Ok(Dist::Pareto),
            "paretonormal" => Ok(Dist::Paretonormal),
            _ => Err(UnknownDist(s.to_string())),
        }
    }
}

impl Dist {
    /// The standardized value `t` (in units of sigma) at quantile `q` in (0, 1).
    pub fn quantile(self, q: f64) -> f64 {
        let q = q.clamp(1e-9, 1.0 - 1e-9);
        match self {
            Dist::Uniform => 2.0 * q - 1.0,
            Dist::Normal => normal_quantile(q).clamp(-TABLE_MAX, TABLE_MAX),
            Dist::Pareto => pareto_quantile(q),
            Dist::Paretonormal => ((normal_quantile(q) + 3.0 * pareto_quantile(q)) / 4.0).clamp(-TABLE_MAX, TABLE_MAX),
        }
    }

    /// A delay in seconds: `mu + sigma * t`, clamped at 0.
    pub fn sample<R: Rng>(self, rng: &mut R, mu: f64, sigma: f64) -> f64 {
        if sigma <= 0.0 {
            return mu.max(0.0);
        }
        (mu + sigma * self.quantile(rng.random::<f64>())).max(0.0)
    }
}

fn pareto_quantile(q: f64) -> f64 {
    (((1.0 - q).powf(-1.0 / 3.0) - 1.5) * 4.0 / 3.0).min(TABLE_MAX)
}

/// Φ⁻¹ by Acklam's rational approximation (relative error < 1.2e-9).
fn normal_quantile(p: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969683028665376e1,
        2.209460984245205e2,
        -2.759285104469687e2,
        1.38357751867269e2,
        -3.066479806614716e1,
        2.506628277459239,
    ];
    const B: [f64; 5] = [
        -5.447609879822406e1,
        1.615858368580409e2,
        -1.556989798598866e2,
        6.680131188771972e1,
        -1.328068155288572e1,
    ];
    const C: [f64; 6] = [
        -7.784894002430293e-3,
        -3.223964580411365e-1,
        -2.400758277161838,
        -2.549732539343734,
        4.374664141464968,
        2.938163982698783,
    ];
    const D: [f64; 4] = [
        7.784695709041462e-3,
        3.224671290700398e-1,
        2.445134137142996,
        3.754408661907416,
    ];
    let plow = 0.02425;
    if p < plow {
        let q = (-2.0 * p.ln()).sqrt();
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    } else if p <= 1.0 - plow {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    } else {
        -normal_quantile(1.0 - p)
    }
}

/// Packet loss model.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
#[serde(tag = "model", rename_all = "snake_case")]
pub enum Loss {
    /// No loss.
    #[default]
    None,
    /// Independent loss with this probability (netem `loss random P`).
    Random { p: f64 },
    /// Gilbert-Elliott (netem `loss gemodel p r 1-h 1-k`): `p` good→bad, `r` bad→good,
    /// `loss_bad` = 1-h (loss probability in the bad state), `loss_good` = 1-k.
    GilbertElliott {
        p: f64,
        r: f64,
        loss_bad: f64,
        loss_good: f64,
    },
}

impl Loss {
    /// The long-run loss probability.
    pub fn mean(&self) -> f64 {
        match *self {
            Loss::None => 0.0,
            Loss::Random { p } => p,
            Loss::GilbertElliott {
                p,
                r,
                loss_bad,
                loss_good,
            } => {
                if p + r <= 0.0 {
                    return loss_good;
                }
                let bad = p / (p + r);
                bad * loss_bad + (1.0 - bad) * loss_good
            }
        }
    }
}

/// The state a loss model keeps between packets.
#[derive(Debug, Default, Clone)]
pub struct LossState {
    bad: bool,
}

impl LossState {
    /// Decides whether the next packet is lost (netem's order: state transition, then the loss
    /// draw with the probability of the state before the transition for the good state, as
    /// `loss_gilb_ell` does).
    pub fn lose<R: Rng>(&mut self, model: &Loss, rng: &mut R) -> bool {
        match *model {
            Loss::None => false,
            Loss::Random { p } => rng.random::<f64>() < p,
            Loss::GilbertElliott {
                p,
                r,
                loss_bad,
                loss_good,
            } => {
                if self.bad {
                    if rng.random::<f64>() < r {
                        self.bad = false;
                    }
                    rng.random::<f64>() < loss_bad
                } else {
                    if rng.random::<f64>() < p {
                        self.bad = true;
                    }
                    rng.random::<f64>() < loss_good
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn moments(d: Dist) -> (f64, f64) {
        let n = 200_000;
        let v: Vec<f64> = (0..n).map(|i| d.quantile((i as f64 + 0.5) / n as f64)).collect();
        let mean = v.iter().sum::<f64>() / n as f64;
        let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64;
        (mean, var.sqrt())
    }

    #[test]
    fn names_parse_and_unknown_ones_are_config_errors() {
        assert_eq!("paretonormal".parse::<Dist>(), Ok(Dist::Paretonormal));
        let e = "gauss".parse::<Dist>().unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown distribution \"gauss\" (uniform, normal, pareto, paretonormal)"
        );
        assert_eq!((e.side(), e.kind()), (Side::Config, "unknown_distribution"));
    }

    #[test]
    fn normal_table_is_standard() {
        let (m, s) = moments(Dist::Normal);
        assert!(m.abs() < 1e-3 && (s - 1.0).abs() < 1e-2, "{m} {s}");
        assert!((normal_quantile(0.975) - 1.959964).abs() < 1e-5);
    }

    #[test]
    fn uniform_spans_plus_minus_sigma() {
        let (m, s) = moments(Dist::Uniform);
        assert!(m.abs() < 1e-3 && (s - 1.0 / 3f64.sqrt()).abs() < 1e-3, "{m} {s}");
    }

    #[test]
    fn pareto_and_paretonormal_match_iproute2_tables() {
        // iproute2's pareto table: first entry (q = 0) is (1 - 1.5) * 4/3 * 8192 = -5461.
        assert!((Dist::Pareto.quantile(0.0) * 8192.0 + 5461.0).abs() < 1.0);
        // Mean of a shape-3 pareto is 1.5, so the shifted table is centred near 0 (capped tail).
        let (m, _) = moments(Dist::Pareto);
        assert!(m.abs() < 0.05, "{m}");
        let (m, s) = moments(Dist::Paretonormal);
        assert!(m.abs() < 0.05 && s > 0.5 && s < 1.2, "{m} {s}");
        // Right-skewed: the median is below the mean.
        assert!(Dist::Paretonormal.quantile(0.5) < m);
    }

    #[test]
    fn delays_are_never_negative() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        for _ in 0..10_000 {
            assert!(Dist::Normal.sample(&mut rng, 0.001, 0.01) >= 0.0);
        }
    }

    #[test]
    fn gilbert_elliott_mean_and_bursts() {
        let model = Loss::GilbertElliott {
            p: 0.01,
            r: 0.2,
            loss_bad: 0.8,
            loss_good: 0.001,
        };
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let mut st = LossState::default();
        let n = 400_000;
        let mut lost = 0usize;
        let mut runs = 0usize;
        let mut prev = false;
        for _ in 0..n {
            let l = st.lose(&model, &mut rng);
            lost += l as usize;
            if l && !prev {
                runs += 1;
            }
            prev = l;
        }
        let rate = lost as f64 / n as f64;
        assert!(
            (rate - model.mean()).abs() < 0.15 * model.mean(),
            "{rate} vs {}",
            model.mean()
        );
        // Bursty: mean run length well above the ~1 of independent loss.
        assert!(lost as f64 / runs as f64 > 2.0);
    }
}
