//! Money per unit of work at the SLO, per trial (docs/trials.md "Figures"): what an hour of the
//! trial's allocation costs, what a million output tokens cost (all of them, and only those of
//! good requests), how much traffic one replica carries at the SLO, what serving the brief's peak
//! would cost a month, the offer's reserved and on-demand rates (the reservation break-even), and
//! whether a managed model API would be cheaper per good request. Every figure is read at the
//! trial's operating point (`evidence::load_points`), whatever order its load points arrived in.
//! Pure: exact decimals for money; measured rates and shares come in as the tools print them.

use rust_decimal::{prelude::FromPrimitive, Decimal, RoundingStrategy};
use serde::Serialize;
use uuid::Uuid;

use crate::{
    evidence::load_points::{describe, LoadPoint, Operating},
    figures::HOURS_PER_MONTH,
};

/// Where the hourly rate comes from, most specific first (`prices::model::allocation_price`, the
/// one price of an allocation every page shows).
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
#[serde(tag = "from", rename_all = "snake_case")]
pub enum RateSource {
    /// The trial's own `rate_per_gpu_hour`.
    Trial,
    /// A current price row of the trial's provider, GPU and billing.
    PriceRow { price_id: Uuid },
    /// What the ledger billed on average per GPU-hour.
    Ledger,
    /// The cheapest current price row of the trial's GPU, any provider and billing (named).
    CheapestOffer { price_id: Uuid },
}

/// What an hour of the allocation costs: a rate per GPU-hour times the GPUs paid for (a price row
/// for 8-GPU nodes bills 8 for a 2-GPU trial), its billing always named.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Rate {
    pub per_gpu_hour: Decimal,
    pub gpus_billed: u32,
    /// `on-demand`, `spot`, `reserved` or `serverless`.
    pub billing: String,
    pub provider: String,
    pub source: RateSource,
    /// Where it comes from, in words ("Lambda's on-demand price of 2026-11-01 (lambda.ai)").
    pub description: String,
}

/// The reserved and on-demand rates of the offer the trial is priced on (same provider, GPU, GPUs
/// per node, region and currency), from the current price sheets.
#[derive(Debug, Clone, Default, PartialEq, Serialize, utoipa::ToSchema)]
pub struct ReservationRates {
    pub reserved_rate: Option<Decimal>,
    pub reserved_price_id: Option<Uuid>,
    /// GPUs a reserved allocation pays for: whole nodes of the reserved row's size.
    pub reserved_gpus_billed: Option<u32>,
    /// "Cloud A's reserved price of 2026-11-01 (quote 9)".
    pub reserved_description: Option<String>,
    pub on_demand_rate: Option<Decimal>,
    pub on_demand_price_id: Option<Uuid>,
}

impl ReservationRates {
    /// Reserved rate ÷ on-demand rate of the same offer, to four places as shown: below that busy
    /// share, paying by the hour and releasing idle GPUs is cheaper. `None` without both rates.
    pub fn break_even(&self) -> Option<Decimal> {
        self.exact_break_even().map(|b| b.round_dp(4))
    }

    /// The same share unrounded (1.00 ÷ 3.00 = 0.3333…): what rule 8 compares against.
    pub fn exact_break_even(&self) -> Option<Decimal> {
        let reserved = self.reserved_rate?;
        let on_demand = self.on_demand_rate.filter(|r| *r > Decimal::ZERO)?;
        Some(reserved / on_demand)
    }
}

/// Rule 8 reserves from the break-even plus this margin of utilization (decision.md); rule 8b's
/// "reserving would pay below" uses the same margin.
pub const BREAK_EVEN_MARGIN: Decimal = Decimal::from_parts(5, 0, 0, false, 2);

/// The reservation comparison (decision.md): reserving against paying by the hour only for the
/// busy hours, like for like, for the GPUs a reservation of the review would rent (replicas for the
/// peak, else one, × whole nodes of the offer) over a month of 730 hours. Rules 8 and 8b, the
/// review's JSON, the first screen, the approval preview and the decision record all read this one
/// figure set, so the money a finance reader checks by hand is the money the rule compared.
#[derive(Debug, Clone, Default, PartialEq, Serialize, utoipa::ToSchema)]
pub struct ReservationComparison {
    /// Reserved rate ÷ on-demand rate of the same offer; null when either price is unknown.
    pub break_even: Option<Decimal>,
    /// Both prices of the offer are known, so the break-even is the offer's own.
    pub break_even_known: bool,
    /// Busy share from which rule 8 reserves: the break-even + 0.05; null without a break-even.
    pub reserve_threshold: Option<Decimal>,
    /// The busy share compared (billed hours less idle hours, ÷ billed hours).
    pub utilization: Option<Decimal>,
    /// The GPUs compared: replicas × GPUs per node of the offer.
    pub gpus: Option<u32>,
    pub reserved_rate_per_gpu_hour: Option<Decimal>,
    pub on_demand_rate_per_gpu_hour: Option<Decimal>,
    /// GPUs × reserved rate × 730.
    pub reserved_monthly: Option<Decimal>,
    /// GPUs × on-demand rate × 730 × utilization: paying by the hour only for the busy hours.
    pub on_demand_busy_monthly: Option<Decimal>,
    /// `on_demand_busy_monthly` − `reserved_monthly`: negative when reserving costs more.
    pub reserve_saving_monthly: Option<Decimal>,
    /// The saving as a share of `on_demand_busy_monthly`.
    pub reserve_saving_share: Option<Decimal>,
    /// The reserved price per GPU-hour below which reserving would pay at this busy share:
    /// on-demand rate × (utilization − 0.05).
    pub reserve_pays_below_rate: Option<Decimal>,
    /// Rule 8b: accepted and busy enough that a reservation could pay, but no reserved price of
    /// the offer is known, so nothing is reserved until one is imported.
    pub reserved_price_needed: bool,
}

/// The reservation comparison of a trial's money at busy share `utilization`
/// ([`ReservationComparison`]); `reserved_price_needed` is rule 8b's to set.
pub fn reservation_comparison(money: Option<&MoneyFacts>, utilization: Option<Decimal>) -> ReservationComparison {
    let margin = BREAK_EVEN_MARGIN;
    let rates = money.map(|m| &m.reservation_rates);
    let break_even = rates.and_then(ReservationRates::break_even);
    let gpus = money.and_then(|m| {
        let per_node = m
            .reservation_rates
            .reserved_gpus_billed
            .or(m.rate.as_ref().map(|r| r.gpus_billed))?;
        Some(m.replicas_for_peak.unwrap_or(1) * per_node)
    });
    let reserved = rates.and_then(|r| r.reserved_rate);
    let on_demand = rates.and_then(|r| r.on_demand_rate);
    let month = |rate: Decimal, n: u32| Decimal::from(n) * rate * HOURS_PER_MONTH;
    let reserved_monthly = reserved.zip(gpus).map(|(r, n)| month(r, n).round_dp(2));
    let on_demand_busy_monthly = on_demand
        .zip(gpus)
        .zip(utilization)
        .map(|((od, n), u)| (month(od, n) * u).round_dp(2));
    let reserve_saving_monthly = on_demand_busy_monthly.zip(reserved_monthly).map(|(od, r)| od - r);
    ReservationComparison {
        break_even,
        break_even_known: break_even.is_some(),
        reserve_threshold: break_even.map(|b| b + margin),
        utilization,
        gpus,
        reserved_rate_per_gpu_hour: reserved,
        on_demand_rate_per_gpu_hour: on_demand,
        reserved_monthly,
        on_demand_busy_monthly,
        reserve_saving_monthly,
        reserve_saving_share: reserve_saving_monthly
            .zip(on_demand_busy_monthly)
            .filter(|(_, od)| *od > Decimal::ZERO)
            .map(|(s, od)| (s / od).round_dp(4)),
        reserve_pays_below_rate: on_demand
            .zip(utilization)
            .filter(|(_, u)| *u > margin)
            .map(|(od, u)| (od * (u - margin)).round_dp(4)),
        reserved_price_needed: false,
    }
}

/// A managed model API's prices per million tokens (the brief's fields).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ApiPrices {
    pub input_per_million: Decimal,
    pub output_per_million: Decimal,
    /// Only the older single price was given: the output price, with input free.
    pub output_price_only: bool,
}

/// What the money figures are computed from.
#[derive(Debug, Clone, Default)]
pub struct MoneyInputs {
    pub rate: Option<Rate>,
    /// The brief's currency: every amount here is in it.
    pub currency: String,
    /// Every load point of the trial's load tests.
    pub points: Vec<LoadPoint>,
    /// The operating point among them (the card's evaluation chose it).
    pub operating: Option<Operating>,
    /// Each target's share from a metrics histogram (`serving.slo_attainment_<target>` with
    /// `serving.slo_attainment_estimated`), for when the operating point has no per-request data.
    pub estimated_shares: Vec<f64>,
    /// The card's attainment target, else the default 95 %.
    pub attainment_target: f64,
    pub expected_peak_rps: Option<f64>,
    /// Spare capacity above the peak, percent (default 0).
    pub headroom_pct: f64,
    pub api: Option<ApiPrices>,
    /// The ledger's measured utilization (idle hours are paid too), for the API break-even.
    pub ledger_utilization: Option<Decimal>,
    pub reservation_rates: ReservationRates,
}

/// The operating point as the review shows it.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct OperatingPointFacts {
    pub evidence_id: Uuid,
    /// The run's name in a sweep file, else empty.
    pub run: String,
    pub offered_rps: Option<f64>,
    pub concurrency: Option<f64>,
    pub achieved_rps: Option<f64>,
    pub slo_attainment: Option<f64>,
    pub goodput_rps: Option<f64>,
    pub output_tokens_per_s: Option<f64>,
    /// It reached the attainment target with its latency criteria passing; else it is the point
    /// with the lowest offered rate (no point qualified).
    pub qualified: bool,
    /// "judged at 8 req/s of the 4–16 req/s sweep (3 load points)".
    pub described: String,
}

/// Rule 6b's comparison: the same good request on this trial and on a managed API.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct ApiBreakEven {
    pub input_price_per_million: Decimal,
    pub output_price_per_million: Decimal,
    pub output_price_only: bool,
    /// Mean prompt and output tokens of a good request at the operating point.
    pub mean_input_tokens: f64,
    pub mean_output_tokens: f64,
    pub api_cost_per_request: Decimal,
    pub api_cost_per_million_output_tokens: Decimal,
    pub our_cost_per_good_request: Decimal,
    pub our_cost_per_million_output_tokens: Decimal,
    /// The ledger's utilization the self-hosted cost was divided by; `None`: at full use ("if
    /// kept busy all the time").
    pub utilization: Option<Decimal>,
    pub api_is_cheaper: bool,
}

/// The money figures of one trial; each is absent while what it needs is not measured.
#[derive(Debug, Clone, Default, PartialEq, Serialize, utoipa::ToSchema)]
pub struct MoneyFacts {
    pub currency: String,
    pub rate: Option<Rate>,
    pub cost_per_hour: Option<Decimal>,
    /// The load point every figure at the SLO (and the card's stage 3) is read at.
    pub operating_point: Option<OperatingPointFacts>,
    pub slo_attainment: Option<f64>,
    /// The attainment is an estimate from histograms: the lowest share of any single target, an
    /// upper bound of the share that met all of them at once ("at most").
    pub slo_attainment_estimated: bool,
    /// Good requests ÷ the operating point's duration.
    pub goodput_rps: Option<f64>,
    /// At the operating point, counting every completed request's output tokens.
    pub cost_per_million_output_tokens: Option<Decimal>,
    /// At the operating point, counting only the output tokens of good requests.
    pub cost_per_million_output_tokens_at_slo: Option<Decimal>,
    /// What one replica carries at the SLO: the operating point's offered rate when the server
    /// kept up with it, else its achieved throughput; absent when no point met the target.
    pub capacity_at_slo_rps: Option<f64>,
    pub attainment_target: f64,
    pub load_points: Vec<LoadPoint>,
    /// Replicas of this allocation for the brief's expected peak (with its headroom), and what
    /// they cost a month: replicas × GPUs per node × rate × 730.
    pub expected_peak_rps: Option<f64>,
    pub headroom_pct: f64,
    pub replicas_for_peak: Option<u32>,
    pub monthly_cost: Option<Decimal>,
    /// Rule 6b's comparison, when the brief gives an API price and the trial's goodput is known.
    pub api: Option<ApiBreakEven>,
    pub api_is_cheaper: Option<bool>,
    pub reservation_rates: ReservationRates,
}

impl MoneyFacts {
    /// Where the rate can be checked: the price row, or the ledger.
    pub fn rate_link(&self) -> Option<String> {
        match &self.rate.as_ref()?.source {
            RateSource::PriceRow { price_id } | RateSource::CheapestOffer { price_id } => {
                Some(format!("price:{price_id}"))
            }
            RateSource::Ledger => Some("ledger:accelerator".into()),
            RateSource::Trial => None,
        }
    }

    /// The price rows the figures used (pinned by the review's digest).
    pub fn price_ids(&self) -> Vec<Uuid> {
        let mut ids = Vec::new();
        if let Some(RateSource::PriceRow { price_id } | RateSource::CheapestOffer { price_id }) =
            self.rate.as_ref().map(|r| &r.source)
        {
            ids.push(*price_id);
        }
        ids.extend(self.reservation_rates.reserved_price_id);
        ids.extend(self.reservation_rates.on_demand_price_id);
        ids.dedup();
        ids
    }

    /// The operating point's own load point.
    pub fn operating_load_point(&self) -> Option<&LoadPoint> {
        let op = self.operating_point.as_ref()?;
        self.load_points
            .iter()
            .find(|p| p.evidence_id == op.evidence_id && p.run == op.run)
    }
}

fn decimal(x: f64) -> Option<Decimal> {
    Decimal::from_f64(x).filter(|d| !d.is_zero() && d.is_sign_positive())
}

/// Four decimal places, half away from zero: enough for a price per million tokens.
fn round4(d: Decimal) -> Decimal {
    d.round_dp_with_strategy(4, RoundingStrategy::MidpointAwayFromZero)
        .normalize()
}

/// Eight decimal places: a price per request.
fn round8(d: Decimal) -> Decimal {
    d.round_dp_with_strategy(8, RoundingStrategy::MidpointAwayFromZero)
        .normalize()
}

/// `ceil(x)` that does not turn 3.0000000000000004 into 4 (at least 1).
pub(crate) fn ceil_count(x: f64) -> u32 {
    ((x - 1e-9).ceil().max(1.0)) as u32
}

/// One money figure after another, each from the ones before.
pub fn money_facts(m: &MoneyInputs) -> MoneyFacts {
    let cost_per_hour = m.rate.as_ref().map(|r| r.per_gpu_hour * Decimal::from(r.gpus_billed));
    let per_million = |tokens_per_s: f64| -> Option<Decimal> {
        let hourly = cost_per_hour?;
        let tokens_per_hour = decimal(tokens_per_s)? * Decimal::from(3600);
        Some(round4(hourly * Decimal::from(1_000_000) / tokens_per_hour))
    };
    let operating = m.operating.and_then(|o| m.points.get(o.index).map(|p| (o, p)));
    let (attainment, attainment_estimated) = attainment_at(m, operating);
    let (goodput, good_tokens_per_s) = good_rates(operating, attainment, attainment_estimated);
    // A qualified point without per-request data met the targets on its latencies: its capacity
    // counts as any other's (trials.md: the operating point's offered rate, or what it achieved),
    // unless the histograms' estimate, an upper bound, already puts it below the target.
    let below_by_estimate = attainment_estimated && attainment.is_some_and(|a| a < m.attainment_target);
    let capacity = operating
        .filter(|(o, _)| o.qualified && !below_by_estimate)
        .and_then(|(_, p)| p.capacity_rps())
        .filter(|c| *c > 0.0);
    let replicas = match (m.expected_peak_rps, capacity) {
        (Some(peak), Some(cap)) if peak > 0.0 => Some(ceil_count(peak * (1.0 + m.headroom_pct / 100.0) / cap)),
        _ => None,
    };
    let monthly = match (replicas, &m.rate) {
        (Some(n), Some(r)) => {
            Some((Decimal::from(n) * Decimal::from(r.gpus_billed) * r.per_gpu_hour * HOURS_PER_MONTH).round_dp(2))
        }
        _ => None,
    };
    let api = match (m.api, operating, goodput, cost_per_hour) {
        (Some(api), Some((_, p)), Some(g), Some(hourly)) if g > 0.0 => {
            api_break_even(api, p, g, hourly, m.ledger_utilization)
        }
        _ => None,
    };
    MoneyFacts {
        currency: m.currency.clone(),
        rate: m.rate.clone(),
        cost_per_hour,
        operating_point: operating.map(|(o, p)| OperatingPointFacts {
            evidence_id: p.evidence_id,
            run: p.run.clone(),
            offered_rps: p.offered_rps,
            concurrency: p.concurrency,
            achieved_rps: p.achieved_rps,
            slo_attainment: attainment,
            goodput_rps: goodput,
            output_tokens_per_s: p.output_tokens_per_s,
            qualified: o.qualified,
            described: describe(&m.points, o),
        }),
        slo_attainment: attainment,
        slo_attainment_estimated: attainment_estimated,
        goodput_rps: goodput,
        cost_per_million_output_tokens: operating.and_then(|(_, p)| p.output_tokens_per_s).and_then(per_million),
        cost_per_million_output_tokens_at_slo: good_tokens_per_s.and_then(per_million),
        capacity_at_slo_rps: capacity,
        attainment_target: m.attainment_target,
        load_points: m.points.clone(),
        expected_peak_rps: m.expected_peak_rps,
        headroom_pct: m.headroom_pct,
        replicas_for_peak: replicas,
        monthly_cost: monthly,
        api_is_cheaper: api.as_ref().map(|a| a.api_is_cheaper),
        api,
        reservation_rates: m.reservation_rates.clone(),
    }
}

/// The SLO attainment at the operating point, and whether it is estimated from a metrics
/// histogram (when the point has no measured one).
fn attainment_at(m: &MoneyInputs, operating: Option<(Operating, &LoadPoint)>) -> (Option<f64>, bool) {
    let estimated = m
        .estimated_shares
        .iter()
        .copied()
        .filter(|a| a.is_finite() && (0.0..=1.0).contains(a))
        .reduce(f64::min);
    match (operating.and_then(|(_, p)| p.attainment), estimated) {
        (Some(a), _) => (Some(a), false),
        (None, Some(e)) if operating.is_some_and(|(_, p)| !p.nothing_completed()) => (Some(e), true),
        (None, _) if operating.is_some_and(|(_, p)| p.nothing_completed()) => (Some(0.0), false),
        _ => (None, false),
    }
}

/// Good requests and good output tokens per second at the operating point.
fn good_rates(
    operating: Option<(Operating, &LoadPoint)>,
    attainment: Option<f64>,
    attainment_estimated: bool,
) -> (Option<f64>, Option<f64>) {
    // Good requests per completed one: what scales "all completed" figures to "good only" when
    // the point has no per-request tokens (sent ÷ completed × attainment).
    let good_share_of_completed = |p: &LoadPoint, a: f64| match (p.sent(), p.completed) {
        (Some(sent), Some(done)) if done > 0.0 => a * sent / done,
        _ => a,
    };
    let goodput = operating.and_then(|(_, p)| {
        let a = attainment?;
        match (p.goodput_rps, attainment_estimated) {
            (Some(g), false) => Some(g),
            _ => Some(good_share_of_completed(p, a) * p.achieved_rps?),
        }
    });
    let good_tokens_per_s = operating.and_then(|(_, p)| {
        let a = attainment?;
        match (p.good_output_tokens_per_s, attainment_estimated) {
            (Some(t), false) => Some(t),
            _ => Some(good_share_of_completed(p, a) * p.output_tokens_per_s?),
        }
    });
    (goodput, good_tokens_per_s)
}

/// Rule 6b's figures: the API's cost of a good request (mean prompt tokens × input price + mean
/// output tokens × output price) against the trial's (node cost per hour ÷ good requests per
/// hour, divided by the ledger's utilization when it is measured). `None` when the mean tokens a
/// non-zero price needs are not known.
fn api_break_even(
    api: ApiPrices,
    p: &LoadPoint,
    goodput_rps: f64,
    cost_per_hour: Decimal,
    utilization: Option<Decimal>,
) -> Option<ApiBreakEven> {
    let mean_output = p
        .number("serving.good_mean_output_tokens")
        .or_else(|| p.number("serving.mean_output_tokens"))
        .or_else(|| Some(p.output_tokens_per_s? / p.achieved_rps.filter(|r| *r > 0.0)?))
        .filter(|n| *n > 0.0)?;
    let mean_input = match p
        .number("serving.good_mean_input_tokens")
        .or_else(|| p.number("serving.mean_input_tokens"))
    {
        Some(n) => n,
        None if api.input_per_million.is_zero() => 0.0,
        None => return None,
    };
    let million = Decimal::from(1_000_000);
    let tokens = |n: f64| Decimal::from_f64(n).unwrap_or_default();
    let api_per_request =
        (tokens(mean_input) * api.input_per_million + tokens(mean_output) * api.output_per_million) / million;
    // A busy share of 0 or below (idle hours reported past the billed ones) is a ledger to fix, not
    // a trial kept busy all the time: no comparison, rather than the cheapest one.
    if utilization.is_some_and(|u| u <= Decimal::ZERO) {
        return None;
    }
    let utilization = utilization.filter(|u| *u <= Decimal::ONE);
    let good_per_hour = decimal(goodput_rps)? * Decimal::from(3600);
    let mut ours = cost_per_hour / good_per_hour;
    if let Some(u) = utilization {
        ours /= u;
    }
    let per_million_output = |per_request: Decimal| round4(per_request / tokens(mean_output) * million);
    Some(ApiBreakEven {
        input_price_per_million: api.input_per_million,
        output_price_per_million: api.output_per_million,
        output_price_only: api.output_price_only,
        mean_input_tokens: mean_input,
        mean_output_tokens: mean_output,
        api_cost_per_request: round8(api_per_request),
        api_cost_per_million_output_tokens: per_million_output(api_per_request),
        our_cost_per_good_request: round8(ours),
        our_cost_per_million_output_tokens: per_million_output(ours),
        utilization,
        api_is_cheaper: ours > api_per_request,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::evidence::load_points::load_points;

    fn d(s: &str) -> Decimal {
        s.parse().unwrap()
    }

    /// A load point as the parser stores it: `sent` requests over `duration` seconds at `offered`
    /// requests/s, `good` of them inside every target, 100 output tokens each.
    fn point(offered: f64, duration: f64, completed: f64, failed: f64, good: f64) -> LoadPoint {
        let metrics = json!({
            "serving.offered_rps": offered,
            "serving.duration_s": duration,
            "serving.completed": completed,
            "serving.failed": failed,
            "serving.request_throughput_rps": completed / duration,
            "serving.output_tokens_per_s": completed * 100.0 / duration,
            "serving.slo_attainment": good / (completed + failed),
            "serving.goodput_rps": good / duration,
            "serving.good_output_tokens_per_s": good * 100.0 / duration,
            "serving.good_mean_input_tokens": 400.0,
            "serving.good_mean_output_tokens": 100.0,
        });
        load_points(Uuid::nil(), json!(metrics).as_object().unwrap()).remove(0)
    }

    fn inputs(points: Vec<LoadPoint>, index: usize, qualified: bool) -> MoneyInputs {
        MoneyInputs {
            rate: Some(Rate {
                per_gpu_hour: d("2.50"),
                gpus_billed: 2,
                billing: "on-demand".into(),
                provider: String::new(),
                source: RateSource::Trial,
                description: "the trial's rate".into(),
            }),
            currency: "USD".into(),
            points,
            operating: Some(Operating { index, qualified }),
            attainment_target: 0.95,
            ..MoneyInputs::default()
        }
    }

    #[test]
    fn goodput_counts_a_failed_request_once_and_cost_at_the_slo_counts_good_tokens() {
        // 100 requests over 10 s: 90 completed, 10 failed, 68 good. vLLM's goodput: 68 ÷ 10 = 6.8
        // requests/s (attainment × throughput would count the failures twice: 0.68 × 9 = 6.12).
        let f = money_facts(&inputs(vec![point(10.0, 10.0, 90.0, 10.0, 68.0)], 0, false));
        assert!((f.goodput_rps.unwrap() - 6.8).abs() < 1e-12);
        assert_eq!(f.slo_attainment, Some(0.68));
        // 2 × 2.50 = 5.00 an hour. All tokens: 900 a second → 5 ÷ 3.24 M = 1.5432 per million.
        // Good tokens: 680 a second → 5 ÷ 2.448 M = 2.0425 per million.
        assert_eq!(f.cost_per_million_output_tokens, Some(d("1.5432")));
        assert_eq!(f.cost_per_million_output_tokens_at_slo, Some(d("2.0425")));
        assert_eq!(f.capacity_at_slo_rps, None, "68 % is below the 95 % target");
    }

    #[test]
    fn capacity_is_the_offered_rate_when_the_server_kept_up_and_replicas_carry_the_headroom() {
        let mut m = inputs(vec![point(8.0, 10.0, 78.0, 0.0, 78.0)], 0, true);
        m.expected_peak_rps = Some(20.0);
        let f = money_facts(&m);
        // 7.8 of 8 offered is within 5 %: the capacity is 8 req/s; 20 ÷ 8 → 3 replicas;
        // 3 × 2 GPUs × 2.50 × 730 = 10,950.00 a month.
        assert_eq!(f.capacity_at_slo_rps, Some(8.0));
        assert_eq!(f.replicas_for_peak, Some(3));
        assert_eq!(f.monthly_cost, Some(d("10950")));
        // 25 % headroom: 20 × 1.25 ÷ 8 = 3.125 → 4 replicas.
        m.headroom_pct = 25.0;
        assert_eq!(money_facts(&m).replicas_for_peak, Some(4));
        // The server fell behind (7 of 8): its capacity is what it achieved.
        let m = inputs(vec![point(8.0, 10.0, 70.0, 0.0, 70.0)], 0, true);
        assert_eq!(money_facts(&m).capacity_at_slo_rps, Some(7.0));
    }

    #[test]
    fn histogram_shares_give_an_upper_bound_marked_as_an_estimate() {
        let mut p = point(4.0, 10.0, 40.0, 0.0, 40.0);
        p.attainment = None;
        p.goodput_rps = None;
        p.good_output_tokens_per_s = None;
        let mut m = inputs(vec![p], 0, false);
        m.estimated_shares = vec![0.97, 0.9, 0.99];
        let f = money_facts(&m);
        assert_eq!(f.slo_attainment, Some(0.9));
        assert!(f.slo_attainment_estimated);
        assert!((f.goodput_rps.unwrap() - 3.6).abs() < 1e-9, "at most 90 % of 4 req/s");
        assert_eq!(f.capacity_at_slo_rps, None, "no point met the targets");
        // Its latencies met the targets, but at most 90 % of its requests did: below the 95 %
        // target, an estimate never sizes replicas.
        m.operating = Some(Operating {
            index: 0,
            qualified: true,
        });
        m.expected_peak_rps = Some(10.0);
        assert_eq!(money_facts(&m).capacity_at_slo_rps, None);
        // Without per-request data or an estimate below the target, a point that met the latency
        // targets sizes replicas as any other (trials.md: the operating point's offered rate, or
        // what it achieved).
        m.estimated_shares = vec![0.99, 0.97];
        let f = money_facts(&m);
        assert_eq!(f.capacity_at_slo_rps, Some(4.0));
        assert_eq!(f.replicas_for_peak, Some(3), "10 ÷ 4 → 3");
        m.estimated_shares.clear();
        assert_eq!(money_facts(&m).capacity_at_slo_rps, Some(4.0));
    }

    #[test]
    fn the_api_break_even_is_per_good_request_with_input_and_output_prices() {
        // 100 requests over 10 s, 90 good: goodput 9 req/s. 5.00 an hour ÷ (9 × 3600) =
        // 0.00015432 per good request. The API: 400 × 0.25 + 100 × 1.00 per million = 0.0002.
        let mut m = inputs(vec![point(10.0, 10.0, 100.0, 0.0, 90.0)], 0, false);
        m.api = Some(ApiPrices {
            input_per_million: d("0.25"),
            output_per_million: d("1.00"),
            output_price_only: false,
        });
        let api = money_facts(&m).api.unwrap();
        assert_eq!(api.api_cost_per_request, d("0.0002"));
        assert_eq!(api.our_cost_per_good_request, d("0.00015432"));
        assert_eq!(api.api_cost_per_million_output_tokens, d("2"));
        assert!(!api.api_is_cheaper);
        assert_eq!(api.utilization, None, "if kept busy all the time");
        // Busy half the paid time: every good request carries its idle hour too → 0.00030864.
        m.ledger_utilization = Some(d("0.5"));
        let api = money_facts(&m).api.unwrap();
        assert_eq!(api.our_cost_per_good_request, d("0.00030864"));
        assert!(api.api_is_cheaper);
        // Idle hours reported past the billed ones (a busy share of -25 %) compare nothing: they
        // were read as full use, the cheapest case, which could say the trial beats the API.
        for broken in ["0", "-0.25"] {
            m.ledger_utilization = Some(d(broken));
            assert!(money_facts(&m).api.is_none(), "{broken}");
        }
    }

    #[test]
    fn the_break_even_is_the_offers_reserved_rate_over_its_on_demand_rate() {
        let rates = ReservationRates {
            reserved_rate: Some(d("2.10")),
            on_demand_rate: Some(d("3.50")),
            ..ReservationRates::default()
        };
        assert_eq!(rates.break_even(), Some(d("0.6")));
        assert_eq!(ReservationRates::default().break_even(), None);
    }
}
