//! A night's verdict from the nights (docs/history.md "What decides a night's exit code"): a
//! robust prediction band from the nights of the current level, a two-tier step rule that
//! suspects a step on its first night and confirms it on its second or third, and a step in
//! force until it is restored, accepted or superseded. Pure: the nightly values in, the events
//! and tonight's judgement out; run online over the whole series each night, so a night is
//! judged exactly as it was when it was tonight.
//!
//! At night t, with the nights of the current level (since the last confirmed step, minus the
//! nights of a suspected step, which are held out until it is confirmed or over) as the
//! reference:
//! - **Band**: centre c = the mean of the newest `window` reference log values within [`TRIM`]
//!   (2.5) w of their median (an outlier night is left out, not counted at the edge); width w
//!   learned from the series (below); tonight's z = (ln x - c) / (w sqrt(1 + `center_var` / n))
//!   with n reference nights (the centre's own sampling variance, ~1.1 w^2 / n). Outside
//!   `warn_z` (2) is a suspected step: a WARN.
//! - **Width**: the deviations of the last `scale_window` nights from the median of their own
//!   level (each confirmed step's nights, a restored step's and a suspected step's held nights
//!   are a level of their own): their median / 0.6745 (the MAD), then the root mean square of
//!   those within 2.5 MADs, / sqrt(0.9113) ([`trimmed_sd`]): an outlier night drops out,
//!   alternating nights do not inflate it (as successive differences would), and a step cannot
//!   widen it because its nights are their own level. It is combined with a prior of
//!   `prior_tau` (5 %, a night-to-night drift, not bless's back-to-back tau) worth
//!   `prior_nights` (20) nights: w^2 = (nu0 tau0^2 + m s^2) / (nu0 + m) with m nights learned
//!   from.
//! - **Held out**: a night beyond `hold_z` (3) that starts or continues a suspected step does not
//!   join the level: a step that is not confirmed yet neither moves the centre nor widens the
//!   band, so it cannot be learned as the level and then pass. When a night comes back, the held
//!   nights rejoin the level (an excursion that ended). Nights between `warn_z` and `hold_z`
//!   join it: a slow drift is followed, not alarmed on (holding those out turned a walk of a few
//!   % into confirmed steps end to end).
//! - **Step**: for each candidate first night f among the last `max_after` nights with a
//!   contiguous run f..=t, against the reference nights before f (centre c_f, n_f nights): the
//!   nights' z_i = (ln x_i - c_f) / w. All nights far out: every z_i / sqrt(1 + `center_var` /
//!   n_f) >= `two_night_z` (1.8; `two_night_z_down`, 2.6, for a step down), two nights once
//!   n_f >= `two_night_from` (7), three or more at any n_f: a level of few nights has an uncertain
//!   centre, but three nights in a row this far from it are a step, where the clipped mean below
//!   cannot reach the threshold that uncertainty sets; so a suspected step held out of the level
//!   is confirmed on its third night once it is big enough, never held for good. Any a >= 2
//!   nights: when the mean of the z_i clipped to +-`clip` (1.5: an outlier night counts as 1.5,
//!   not 5) is at least (k + H / a) sqrt(1 + `center_var` a / n_f), k = `allowance` (0.5), H =
//!   `decision` (3.35): a Page CUSUM (Page 1954) over the run with the centre's uncertainty,
//!   never on one night (nor before a = 4 with these figures). Tonight must be beyond k in the
//!   step's direction, and the step's size (the run's median against c_f) at least `min_step`
//!   (5 %). The earliest candidate that passes is the step's first night.
//! - **Red on the night a step up is confirmed** ([`Tonight::StepUp`]); after it the step is in
//!   force ([`Tonight::InForce`], or [`Tonight::StepUpBack`] on a night back nearer the old
//!   level), not red: the nights since the last confirmed change predict those nights. It is in
//!   force until it is restored: its last `restore_nights` (2) nights are all nearer the old level
//!   than the new one (below their geometric midpoint); the step's nights rejoin the old level as
//!   what was learned (a change point that fails to hold resets nothing; rejoining only the
//!   nights back would bias the level low after every false step), and a restored step stays
//!   restored until a new step is confirmed. Nights that are only partly back (one near the old
//!   level, the next near the new) keep it in force: nothing in them says the regression is
//!   gone. A step up that only takes the level back, within `max_after` nights, to where the
//!   last step down came from (not `min_step` above it) is not red: the improvement did not last.
//!   The parameters are calibrated in docs/accuracy.md ("Nightly change points").

use super::quantile::{quantile_type7, sorted};

/// The rule's parameters ([`BandRule::default`] is the calibrated one, docs/accuracy.md
/// "Nightly change points").
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BandRule {
    /// Prior night-to-night spread (log scale) before the nights teach their own.
    pub prior_tau: f64,
    /// The prior's weight, in nights.
    pub prior_nights: f64,
    /// Most reference nights the centre is taken from.
    pub window: usize,
    /// Most nights the width is learned from.
    pub scale_window: usize,
    /// A night this many predicted sd above the centre is a suspected step (WARN).
    pub warn_z: f64,
    /// A suspected step this many predicted sd out is held out of the level until it is
    /// confirmed or over (closer ones join it, so a slow drift is followed, not alarmed on).
    pub hold_z: f64,
    /// Nights all this far out confirm a step up: three at any length of the level, two...
    pub two_night_z: f64,
    /// ...and a step down (further: outlier nights are slow ones, so two nights far below the
    /// level are rarer than two far above it, and a false IMPROVED is a change point too).
    pub two_night_z_down: f64,
    /// ...once the level has this many reference nights (with fewer, the level's own error is
    /// shared by both nights).
    pub two_night_from: usize,
    /// CUSUM allowance k, in widths.
    pub allowance: f64,
    /// CUSUM decision interval H, in widths.
    pub decision: f64,
    /// Each night's z is clipped to +- this in the CUSUM.
    pub clip: f64,
    /// Nights back nearer the old level that restore a step.
    pub restore_nights: usize,
    /// Most nights a step may have run before it is confirmed.
    pub max_after: usize,
    /// Smallest step confirmed, relative.
    pub min_step: f64,
    /// The centre's variance, in w^2 / n.
    pub center_var: f64,
}

impl Default for BandRule {
    fn default() -> Self {
        BandRule {
            prior_tau: 0.05,
            prior_nights: 20.0,
            window: 30,
            scale_window: 30,
            warn_z: 2.0,
            hold_z: 3.0,
            two_night_z: 1.8,
            two_night_z_down: 2.6,
            two_night_from: 7,
            allowance: 0.5,
            decision: 3.35,
            clip: 1.5,
            restore_nights: 2,
            max_after: 10,
            min_step: 0.05,
            center_var: 1.1,
        }
    }
}

/// Which way a level moved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Way {
    /// Slower.
    Up,
    /// Faster.
    Down,
}

impl Way {
    fn sign(self) -> f64 {
        match self {
            Way::Up => 1.0,
            Way::Down => -1.0,
        }
    }
}

/// A confirmed step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LevelStep {
    /// First night of the new level (index into the series).
    pub first: usize,
    /// The night that confirmed it.
    pub found_at: usize,
    pub way: Way,
    /// The old level (the band's centre before the step), in the series' unit.
    pub old: f64,
    /// The step's size when confirmed: the median of its nights / the old level.
    pub ratio: f64,
    /// Reference nights before it.
    pub before: usize,
}

/// How a step up stopped being in force.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Restore {
    /// Its last nights are back nearer the old level.
    Back,
    /// A step down from the new level was confirmed.
    SteppedDown,
}

/// What happened on a night.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Event {
    Step(LevelStep),
    Restored {
        /// The step up restored.
        step: LevelStep,
        /// The night it was restored.
        at: usize,
        how: Restore,
    },
}

/// Tonight's band: where the reference level is and how far tonight is from it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Band {
    /// The reference level (the clipped mean of its log values), in the series' unit.
    pub center: f64,
    /// The band's half-width in predicted sd: tonight's value is inside while within
    /// `center x exp(+-warn_z x sd)`.
    pub sd: f64,
    /// `center x exp(-warn_z sd)` and `center x exp(warn_z sd)`.
    pub lo: f64,
    pub hi: f64,
    /// Tonight in predicted sd from the centre.
    pub z: f64,
    /// Reference nights.
    pub nights: usize,
    /// The learned width w (log scale) and how many nights taught it (0: the prior alone).
    pub width: f64,
    pub width_nights: usize,
}

/// Tonight's judgement.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Tonight {
    /// The first night of the series: nothing to compare with.
    First,
    /// Within the band, no step in force.
    Inside,
    /// Outside the band (or the run of nights beyond the allowance that includes tonight), not
    /// confirmed yet: a suspected step.
    Suspect(Suspect),
    /// A step up was confirmed tonight: the night is red.
    StepUp(LevelStep),
    /// A step up confirmed on an earlier night is in force and tonight is at its level: not red
    /// (the nights since the last confirmed change predict tonight; the tracking issue says the
    /// step is there until it is restored or accepted).
    InForce(LevelStep),
    /// A step up is in force and tonight is back nearer the old level than the new one: the
    /// step is restored if the next night is too.
    StepUpBack(LevelStep),
    /// A step down was confirmed tonight or in the last nights (not restoring a step up).
    StepDown(LevelStep),
    /// A step up was restored tonight.
    Restored(LevelStep, Restore),
    /// A step up confirmed tonight goes back to where the last step down (this one) came from,
    /// or not 5 % past it: the improvement did not last, no regression against the level
    /// before it.
    DownUndone(LevelStep),
}

/// A suspected step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Suspect {
    pub way: Way,
    /// Its first night (the start of the run of nights beyond the allowance).
    pub first: usize,
    /// Reference nights before it.
    pub before: usize,
    /// Nights at the new level so far (tonight included).
    pub nights: usize,
    /// Nights at the new level the rule would need at the run's size so far (its mean clipped
    /// z): `None` when it would not be confirmed within `max_after` nights at that size.
    pub needed: Option<usize>,
    /// Its size so far: the median of its nights / the reference level.
    pub ratio: f64,
}

/// The whole series judged night by night.
#[derive(Debug, Clone, PartialEq)]
pub struct Judged {
    pub events: Vec<Event>,
    pub tonight: Tonight,
    /// Tonight's band (absent on the first night).
    pub band: Option<Band>,
    /// The first night of the current level (the nights the band's centre is taken from start
    /// there, minus a restored step's).
    pub level_start: usize,
}

/// The running state of [`judge`].
struct State {
    /// Per night, the level it was counted in (`usize::MAX`: not yet judged).
    label: Vec<usize>,
    /// The current level's nights, oldest first.
    level: Vec<usize>,
    /// A suspected step's nights, held out of the level: the newest nights, oldest first.
    held: Vec<usize>,
    next_label: usize,
    /// A step up in force: the old level's nights, its centre (log) and the step.
    stepped: Option<(Vec<usize>, f64, LevelStep)>,
    /// The last step down confirmed (not a restore), for IMPROVED.
    down: Option<LevelStep>,
    events: Vec<Event>,
}

/// Judges `series` (oldest first, positive values; the caller drops nights without one) night
/// by night, the last night being tonight.
pub fn judge(series: &[f64], rule: &BandRule) -> Judged {
    let (mut nights, events, level_start) = walk(series, rule);
    let (tonight, band) = nights.pop().unwrap_or((Tonight::First, None));
    Judged {
        events,
        tonight,
        band,
        level_start,
    }
}

/// Every night's judgement as it was that night (for `perfgate calibrate --nightly`).
pub fn judge_every_night(series: &[f64], rule: &BandRule) -> (Vec<Tonight>, Vec<Event>) {
    let (nights, events, _) = walk(series, rule);
    (nights.into_iter().map(|(t, _)| t).collect(), events)
}

/// The width the nights have taught (log scale) once every night of `series` is judged, and how
/// many nights taught it: what tomorrow's band starts from.
pub fn learned_width(series: &[f64], rule: &BandRule) -> (f64, usize) {
    let lx: Vec<f64> = series.iter().map(|v| v.max(1e-300).ln()).collect();
    let mut st = state(lx.len());
    for t in 0..lx.len() {
        night(&lx, t, &mut st, rule);
    }
    // a suspected step's nights count as the level's here: how much the nights move includes
    // them until a step is confirmed
    rejoin_held(&mut st, |_| true);
    width(&lx, &st.label, lx.len(), rule)
}

/// The smallest step (relative: 0.2 = +20 %) the rule can confirm at all, within `max_after`
/// nights, on nights of width `width` with `reference` nights before it: the CUSUM's floor,
/// exp((k + H / a) sqrt(1 + center_var a / n) w) - 1 at a = `max_after` (each night exactly at
/// the step, none clipped).
pub fn smallest_confirmable(width: f64, reference: usize, rule: &BandRule) -> f64 {
    let a = rule.max_after.max(2) as f64;
    let n = reference.clamp(1, rule.window.max(1)) as f64;
    let widths = (rule.allowance + rule.decision / a) * (1.0 + rule.center_var * a / n).sqrt();
    (widths * width).exp_m1().max(rule.min_step)
}

fn state(n: usize) -> State {
    State {
        label: vec![usize::MAX; n],
        level: Vec::new(),
        held: Vec::new(),
        next_label: 1,
        stepped: None,
        down: None,
        events: Vec::new(),
    }
}

type Walked = (Vec<(Tonight, Option<Band>)>, Vec<Event>, usize);

fn walk(series: &[f64], rule: &BandRule) -> Walked {
    let lx: Vec<f64> = series.iter().map(|v| v.max(1e-300).ln()).collect();
    let mut st = state(lx.len());
    let nights = (0..lx.len())
        .map(|t| night(&lx, t, &mut st, rule))
        .collect();
    let level_start = st.level.first().copied().unwrap_or(0);
    (nights, st.events, level_start)
}

/// Night `t` judged against the state of nights `..t`, which it updates.
fn night(lx: &[f64], t: usize, st: &mut State, rule: &BandRule) -> (Tonight, Option<Band>) {
    if st.level.is_empty() {
        st.level.push(t);
        st.label[t] = 0;
        return (Tonight::First, None);
    }
    let (w, w_nights) = width(lx, &st.label, t, rule);
    let reference = newest(&st.level, rule.window);
    let (c, n) = center(lx, &reference, w);
    let sd = w * (1.0 + rule.center_var / n as f64).sqrt();
    let z = (lx[t] - c) / sd;
    let band = Band {
        center: c.exp(),
        sd,
        lo: (c - rule.warn_z * sd).exp(),
        hi: (c + rule.warn_z * sd).exp(),
        z,
        nights: n,
        width: w,
        width_nights: w_nights,
    };
    if let Some(judged) = restore(lx, t, st, rule) {
        return (judged, Some(band));
    }
    if let Some(step) = confirm(lx, t, w, st, rule) {
        st.events.push(Event::Step(step));
        let old: Vec<usize> = st
            .level
            .iter()
            .copied()
            .filter(|&i| i < step.first)
            .collect();
        let label = st.next_label;
        st.next_label += 1;
        st.level = (step.first..=t).collect();
        for i in step.first..=t {
            st.label[i] = label;
        }
        // held nights before the step's first keep their own label (a level of their own)
        st.held.clear();
        return match step.way {
            Way::Up
                if st.stepped.is_none()
                    && st.down.is_some_and(|d| undone(lx, &step, &d, t, rule)) =>
            {
                let d = st.down.take().expect("checked");
                (Tonight::DownUndone(d), Some(band))
            }
            Way::Up => {
                st.down = None;
                // a second step up while one is in force: still measured from the first's old level
                st.stepped = Some(match st.stepped.take() {
                    Some((o, oc, first)) => (
                        o,
                        oc,
                        LevelStep {
                            found_at: t,
                            ..first
                        },
                    ),
                    None => (old, step.old.ln(), step),
                });
                let (_, oc, first) = st.stepped.as_ref().expect("set above");
                let shown = LevelStep {
                    ratio: median_of(lx, &(first.first..=t).collect::<Vec<_>>()).exp() / oc.exp(),
                    ..*first
                };
                (Tonight::StepUp(shown), Some(band))
            }
            Way::Down => match st.stepped.take() {
                Some((_, _, up)) => {
                    st.events.push(Event::Restored {
                        step: up,
                        at: t,
                        how: Restore::SteppedDown,
                    });
                    (Tonight::Restored(up, Restore::SteppedDown), Some(band))
                }
                None => {
                    st.down = Some(step);
                    (Tonight::StepDown(step), Some(band))
                }
            },
        };
    }
    // outside the band, no step in force: a suspected step, named from the run of nights beyond
    // the allowance against the level as it was before tonight
    let suspected = (st.stepped.is_none() && z.abs() > rule.warn_z)
        .then(|| suspect(lx, t, w, st, rule))
        .flatten();
    // far outside: held out of the level (held nights before the run rejoin it)
    if let Some(s) = suspected.filter(|_| z.abs() > rule.hold_z) {
        rejoin_held(st, |i| i < s.first);
        let label = match st.held.first() {
            Some(&i) => st.label[i],
            None => {
                st.next_label += 1;
                st.next_label - 1
            }
        };
        st.held.push(t);
        st.label[t] = label;
        return (Tonight::Suspect(s), Some(band));
    }
    // tonight joins the current level, after the nights held out (the excursion is over)
    rejoin_held(st, |_| true);
    st.level.push(t);
    st.label[t] = st.label[*st.level.first().expect("non-empty")];
    if let Some((_, oc, up)) = &st.stepped {
        let ratio = median_of(lx, &(up.first..=t).collect::<Vec<_>>()).exp() / oc.exp();
        let shown = LevelStep { ratio, ..*up };
        // back tonight: below the midpoint [`restore`] tests tomorrow (the old level and the
        // median of the step's nights before tonight)
        let before: Vec<usize> = st.level.iter().copied().filter(|&i| i < t).collect();
        let back = !before.is_empty() && lx[t] < (oc + median_of(lx, &before)) / 2.0;
        if back {
            return (Tonight::StepUpBack(shown), Some(band));
        }
        return (Tonight::InForce(shown), Some(band));
    }
    if let Some(s) = suspected {
        return (Tonight::Suspect(s), Some(band));
    }
    match st.down {
        Some(d) if t < d.first + rule.max_after => (Tonight::StepDown(d), Some(band)),
        _ => (Tonight::Inside, Some(band)),
    }
}

/// Whether a step up confirmed tonight only undoes the last step down: within `max_after` nights
/// of that step down's first night, its nights' median is not `min_step` above the level before
/// it (with no other step between them). A step down that held longer is the level: a step up
/// from it is a regression (a false step down from a first night that was an outlier left every
/// later step up back to that outlier's level unreported).
fn undone(lx: &[f64], up: &LevelStep, down: &LevelStep, t: usize, rule: &BandRule) -> bool {
    if t >= down.first + rule.max_after {
        return false;
    }
    let run: Vec<usize> = (up.first..=t).collect();
    median_of(lx, &run).exp() < down.old * (1.0 + rule.min_step)
}

/// The nights held out of the level that `which` picks rejoin it (their suspected step is over).
fn rejoin_held(st: &mut State, which: impl Fn(usize) -> bool) {
    let Some(&first) = st.level.first() else {
        return;
    };
    let label = st.label[first];
    let (back, keep): (Vec<usize>, Vec<usize>) = st.held.iter().partition(|&&i| which(i));
    for &i in &back {
        st.label[i] = label;
    }
    st.level.extend(back);
    st.held = keep;
}

/// A step up in force restored tonight: back nearer the old level for `restore_nights` nights,
/// which rejoin the old level.
fn restore(lx: &[f64], t: usize, st: &mut State, rule: &BandRule) -> Option<Tonight> {
    let (old, oc, up) = st.stepped.as_ref()?;
    let (oc, up) = (*oc, *up);
    let r = rule.restore_nights.max(1);
    let new_nights: Vec<usize> = st.level.iter().copied().filter(|&i| i + r <= t).collect();
    let back = t >= up.first + r && !new_nights.is_empty() && {
        let mid = (oc + median_of(lx, &new_nights)) / 2.0;
        (t + 1 - r..=t).all(|i| i >= up.first && lx[i] < mid)
    };
    if !back {
        return None;
    }
    let how = Restore::Back;
    // all the step's nights rejoin the old level: rejoining only the nights back (the low ones)
    // and leaving out the step's (the high ones) would bias the level low after every false
    // step, and the next false step would follow from it
    let rejoin: Vec<usize> = (up.first..=t).collect();
    let mut level = old.clone();
    let label = level.first().map_or(0, |&i| st.label[i]);
    for &i in &rejoin {
        st.label[i] = label;
    }
    level.extend(rejoin);
    st.level = level;
    st.stepped = None;
    st.events.push(Event::Restored {
        step: up,
        at: t,
        how,
    });
    Some(Tonight::Restored(up, how))
}

/// The step tonight confirms, if any: the earliest candidate run that passes its threshold.
fn confirm(lx: &[f64], t: usize, w: f64, st: &State, rule: &BandRule) -> Option<LevelStep> {
    let mut best: Option<(f64, LevelStep)> = None;
    for f in t.saturating_sub(rule.max_after.max(2) - 1)..t {
        let Some((before, c, n)) = candidate(lx, f, t, w, st, rule) else {
            continue;
        };
        let run: Vec<usize> = (f..=t).collect();
        let a = run.len() as f64;
        let zs: Vec<f64> = run.iter().map(|&i| (lx[i] - c) / w).collect();
        let mean = zs
            .iter()
            .map(|z| z.clamp(-rule.clip, rule.clip))
            .sum::<f64>()
            / a;
        let thr = (rule.allowance + rule.decision / a) * (1.0 + rule.center_var * a / n).sqrt();
        let infl = (1.0 + rule.center_var / n).sqrt();
        let ratio = (median_of(lx, &run) - c).exp();
        for way in [Way::Up, Way::Down] {
            let sg = way.sign();
            if sg * zs[zs.len() - 1] <= rule.allowance {
                continue;
            }
            let mut margin = sg * mean - thr;
            if all_far(run.len(), n, rule) {
                let two = match way {
                    Way::Up => rule.two_night_z,
                    Way::Down => rule.two_night_z_down,
                };
                margin = margin
                    .max(zs.iter().map(|z| sg * z).fold(f64::INFINITY, f64::min) / infl - two);
            }
            let big = match way {
                Way::Up => ratio >= 1.0 + rule.min_step,
                Way::Down => ratio <= 1.0 / (1.0 + rule.min_step),
            };
            // the earliest candidate that passes is the step's start (a later one would count
            // the step's own first nights in its reference level)
            if margin >= 0.0 && big && best.is_none_or(|(m, b)| b.first == f && margin > m) {
                best = Some((
                    margin,
                    LevelStep {
                        first: f,
                        found_at: t,
                        way,
                        old: c.exp(),
                        ratio,
                        before,
                    },
                ));
            }
        }
    }
    best.map(|(_, s)| s)
}

/// Whether a run of `nights` nights against `n` reference nights may be confirmed by every night
/// being beyond `two_night_z`: two nights once the level has `two_night_from`, three or more at
/// any n (so three nights held out of the level, each beyond `hold_z`, are a step when it is
/// big enough).
fn all_far(nights: usize, n: f64, rule: &BandRule) -> bool {
    nights >= 3 || (nights == 2 && n >= rule.two_night_from as f64)
}

/// Whether night `i` is the current level's or held out of it.
fn judged_in_level(st: &State, i: usize) -> bool {
    st.level.contains(&i) || st.held.contains(&i)
}

/// A candidate run f..=t: its nights before tonight must be the current level's newest (or held
/// out of it), with at least one reference night before f. Returns (reference nights, their
/// centre, n as f64).
fn candidate(
    lx: &[f64],
    f: usize,
    t: usize,
    w: f64,
    st: &State,
    rule: &BandRule,
) -> Option<(usize, f64, f64)> {
    let before: Vec<usize> = st.level.iter().copied().filter(|&i| i < f).collect();
    let after = st.level.iter().chain(&st.held).filter(|&&i| i >= f).count();
    if before.is_empty() || after != t - f || (f..t).any(|i| !judged_in_level(st, i)) {
        return None;
    }
    let reference = newest(&before, rule.window);
    let (c, n) = center(lx, &reference, w);
    Some((before.len(), c, n as f64))
}

/// The suspected step tonight is part of: the run of nights beyond the allowance that ends
/// tonight, in tonight's direction.
fn suspect(lx: &[f64], t: usize, w: f64, st: &State, rule: &BandRule) -> Option<Suspect> {
    let reference = newest(&st.level, rule.window);
    let (c, _) = center(lx, &reference, w);
    let way = if lx[t] >= c { Way::Up } else { Way::Down };
    let sg = way.sign();
    let beyond = |i: usize| sg * (lx[i] - c) / w > rule.allowance;
    if !beyond(t) {
        return None;
    }
    let mut first = t;
    while first > 0
        && first > t.saturating_sub(rule.max_after - 1)
        && judged_in_level(st, first - 1)
        && beyond(first - 1)
    {
        first -= 1;
    }
    let (before, c, n) = candidate(lx, first, t, w, st, rule).or_else(|| {
        // the run reaches back to the level's first night: measured against the rest
        let r: Vec<usize> = st.level.iter().copied().filter(|&i| i < first).collect();
        (!r.is_empty()).then(|| {
            let (c, n) = center(lx, &r, w);
            (r.len(), c, n as f64)
        })
    })?;
    let run: Vec<usize> = (first..=t).collect();
    let zbar = sg * mean_clipped_z(lx, &run, c, w, rule.clip);
    let nights = run.len();
    let needed = (nights.max(2)..=rule.max_after).find(|&a| {
        let af = a as f64;
        let two = all_far(a, n, rule) && {
            let min = run
                .iter()
                .map(|&i| sg * (lx[i] - c) / w)
                .fold(f64::INFINITY, f64::min);
            min / (1.0 + rule.center_var / n).sqrt() >= rule.two_night_z
        };
        two || zbar
            >= (rule.allowance + rule.decision / af) * (1.0 + rule.center_var * af / n).sqrt()
    });
    Some(Suspect {
        way,
        first,
        before,
        nights,
        needed,
        ratio: (median_of(lx, &run) - c).exp(),
    })
}

/// The learned width at night t (nights before t): the MAD of the newest `scale_window` nights
/// around the median of their own level, / 0.6745, combined with the prior. Returns the width
/// and how many nights taught it.
fn width(lx: &[f64], label: &[usize], t: usize, rule: &BandRule) -> (f64, usize) {
    let from = t.saturating_sub(rule.scale_window);
    let mut labels: Vec<usize> = label[from..t].to_vec();
    labels.sort_unstable();
    labels.dedup();
    let mut dev: Vec<f64> = Vec::new();
    for l in labels {
        let idx: Vec<usize> = (from..t).filter(|&i| label[i] == l).collect();
        if idx.len() < 2 {
            continue;
        }
        let m = median_of(lx, &idx);
        dev.extend(idx.iter().map(|&i| (lx[i] - m).abs()));
    }
    let prior = rule.prior_tau.powi(2) * rule.prior_nights;
    // a level of n nights has n - 1 free deviations; fewer than 3 teach nothing yet
    if dev.len() < 3 {
        return (rule.prior_tau, 0);
    }
    let s = trimmed_sd(&dev);
    let m = dev.len() as f64;
    (
        ((prior + m * s * s) / (rule.prior_nights + m)).sqrt(),
        dev.len(),
    )
}

/// The centre of `idx`'s log values: their mean, each clipped to their median +- 2 w (an outlier
/// night counts as 2 widths out, not 5), and how many.
/// The spread of deviations `dev` (absolute, around their level's median) as a standard
/// deviation: their median / 0.6745 first (the MAD), then the root mean square of those within
/// [`TRIM`] of it, divided by the root of a standard normal's E[z^2 | |z| <= TRIM] (0.9113): an
/// outlier night drops out, as it does from the MAD, but the rest count with their size (about
/// 90 % efficient at the normal, where the MAD is 37 %: the band's width from 30 nights is
/// uncertain by ~14 %, not ~21 %).
fn trimmed_sd(dev: &[f64]) -> f64 {
    let mad = median(dev) / 0.674_489_75;
    let kept: Vec<f64> = dev.iter().copied().filter(|d| *d <= TRIM * mad).collect();
    if mad <= 0.0 || kept.is_empty() {
        return mad;
    }
    (kept.iter().map(|d| d * d).sum::<f64>() / kept.len() as f64 / TRIMMED_Z2).sqrt()
}

/// Deviations beyond this many MAD-widths are left out of the width, and nights beyond this many
/// widths from the median out of the centre.
const TRIM: f64 = 2.5;
/// E[z^2 | |z| <= 2.5] for a standard normal: (P - 2 c phi(c)) / P with c = 2.5, P = 0.987581,
/// phi(2.5) = 0.0175283: (0.987581 - 0.0876415) / 0.987581.
const TRIMMED_Z2: f64 = 0.911_257;

/// The level: the mean of the nights within [`TRIM`] widths of their median (an outlier night
/// is left out rather than counted at the edge, which biased the level up by a tenth of a width
/// with 5 % outlier nights), and how many nights it is taken from.
fn center(lx: &[f64], idx: &[usize], w: f64) -> (f64, usize) {
    let m = median_of(lx, idx);
    let n = idx.len().max(1);
    let kept: Vec<f64> = idx
        .iter()
        .map(|&i| lx[i])
        .filter(|x| (x - m).abs() <= TRIM * w)
        .collect();
    if kept.is_empty() {
        return (m, n);
    }
    (kept.iter().sum::<f64>() / kept.len() as f64, n)
}

fn mean_clipped_z(lx: &[f64], idx: &[usize], c: f64, w: f64, clip: f64) -> f64 {
    idx.iter()
        .map(|&i| ((lx[i] - c) / w).clamp(-clip, clip))
        .sum::<f64>()
        / idx.len().max(1) as f64
}

fn newest(idx: &[usize], k: usize) -> Vec<usize> {
    idx[idx.len().saturating_sub(k)..].to_vec()
}

fn median_of(lx: &[f64], idx: &[usize]) -> f64 {
    median(&idx.iter().map(|&i| lx[i]).collect::<Vec<_>>())
}

fn median(v: &[f64]) -> f64 {
    quantile_type7(&sorted(v), 0.5).unwrap_or(f64::NAN)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 100 x e^o per night.
    fn nights(o: &[f64]) -> Vec<f64> {
        o.iter().map(|o| 100.0 * o.exp()).collect()
    }

    /// Ten nights whose log deviations are known: median 0, MAD 0.02.
    const TEN: [f64; 10] = [0.0, 0.02, -0.02, 0.01, -0.01, 0.03, -0.03, 0.0, 0.02, -0.02];

    /// 30 nights of the same +-3 % pattern three times (median 0, MAD 0.02).
    fn thirty() -> Vec<f64> {
        TEN.iter().cycle().take(30).copied().collect()
    }

    /// Each night's judgement as a word: red (a step up confirmed tonight), in force (a step up
    /// confirmed before, tonight at its level), back (in force, tonight back nearer the old
    /// level), restored, warn (a suspected step), pass.
    fn kinds(every: &[Tonight]) -> Vec<&'static str> {
        every
            .iter()
            .map(|t| match t {
                Tonight::StepUp(_) => "red",
                Tonight::InForce(_) => "in force",
                Tonight::StepUpBack(_) => "back",
                Tonight::Restored(..) => "restored",
                Tonight::Suspect(_) => "warn",
                _ => "pass",
            })
            .collect()
    }

    fn with(o: &[f64], then: &[f64]) -> Vec<f64> {
        let mut v = nights(o);
        v.extend(then);
        v
    }

    #[test]
    fn the_band_by_hand_and_a_first_night_outside_it_is_a_suspect() {
        let r = BandRule::default();
        // 10 nights, deviations from their median 0: 0, .02, .02, .01, .01, .03, .03, 0, .02, .02;
        // MAD .02 / 0.67449 = 0.029652, none beyond 2.5 x that, so s^2 = mean d^2 / 0.911257 =
        // 3.6e-4 / 0.911257 = 3.95058e-4; with the prior (5 %, worth 20 nights): w = sqrt((20 x
        // 0.05^2 + 10 x 3.95058e-4) / 30) = 0.042407; the centre is the mean of the logs (none
        // beyond 2.5 w of their median): 0, so 100 ms; sd = w sqrt(1 + 1.1 / 10) = 0.044679;
        // band 100 x e^(+-2 sd) = [91.452, 109.347]
        let j = judge(&with(&TEN, &[108.0]), &r);
        let b = j.band.unwrap();
        assert!((b.width - 0.042407).abs() < 1e-6, "{b:?}");
        assert!((b.sd - 0.044679).abs() < 1e-6, "{b:?}");
        assert!((b.center - 100.0).abs() < 1e-9);
        assert!(
            (b.lo - 91.452).abs() < 1e-3 && (b.hi - 109.347).abs() < 1e-3,
            "{b:?}"
        );
        assert_eq!((b.nights, b.width_nights), (10, 10));
        // 108: z = ln 1.08 / 0.044679 = 1.7226, inside
        assert!((b.z - 1.7226).abs() < 1e-3, "{b:?}");
        assert_eq!(j.tonight, Tonight::Inside);
        // 112: z = 2.5365, outside: a suspected step up from tonight (night index 10), 10 nights
        // before it; at this size two nights confirm it (ln 1.12 / w / sqrt(1.11) = 2.54 >= 1.8)
        let j = judge(&with(&TEN, &[112.0]), &r);
        match j.tonight {
            Tonight::Suspect(s) => {
                assert_eq!((s.way, s.first, s.before, s.nights), (Way::Up, 10, 10, 1));
                assert_eq!(s.needed, Some(2));
                assert!((s.ratio - 1.12).abs() < 1e-9);
            }
            other => panic!("{other:?}"),
        }
        assert!(j.events.is_empty());
        // the first night of a series has no band
        let j = judge(&[100.0], &r);
        assert_eq!((j.tonight, j.band), (Tonight::First, None));
    }

    #[test]
    fn a_step_is_confirmed_on_its_second_night_when_both_are_far_out() {
        // night 11 (index 11) is 112 again: night 10 (z 2.54, inside `hold_z`) joined the level,
        // so the width is learned from nights 0..=10 (11 deviations; the MAD still 0.02, and 112's
        // deviation ln 1.12 = 0.1133 is beyond 2.5 x 0.029652 and left out of the mean square):
        // sqrt((20 x 0.05^2 + 11 x 3.95058e-4) / 31) = 0.041870; against the 10 nights before the
        // step (centre 100, sd factor sqrt 1.11) both nights are at ln 1.12 / 0.041870 / 1.05357
        // = 2.569 >= 1.8: confirmed, red
        let j = judge(&with(&TEN, &[112.0, 112.0]), &BandRule::default());
        let Tonight::StepUp(s) = j.tonight else {
            panic!("{:?}", j.tonight)
        };
        assert_eq!(
            (s.first, s.found_at, s.way, s.before),
            (10, 11, Way::Up, 10)
        );
        assert!(
            (s.ratio - 1.12).abs() < 1e-9 && (s.old - 100.0).abs() < 1e-9,
            "{s:?}"
        );
        assert_eq!(j.events, vec![Event::Step(s)]);
        assert_eq!(j.level_start, 10);
    }

    #[test]
    fn a_smaller_step_is_confirmed_on_its_fourth_night_by_the_cusum() {
        // 30 nights (w = sqrt((20 x 0.05^2 + 30 x 3.95058e-4) / 50) = 0.035172 with the prior),
        // then +9 %, +5 %, +9 %, +9 %: z ~ 2.4, 1.4, 2.4, 2.4 (the second inside the band: PASS,
        // and not two nights far out, so the two-night rule never starts at night 30); each z
        // clipped to 1.5 in the CUSUM, the run's mean is (1.5 + 1.36 + 1.5 + 1.5) / 4 = 1.465
        // on the fourth night, which clears (0.5 + 3.35 / 4) sqrt(1 + 1.1 x 4 / 30) = 1.432;
        // on the third, (0.5 + 3.35 / 3) sqrt(1 + 3.3 / 30) = 1.703 is beyond any clipped mean
        let o = thirty();
        let r = BandRule::default();
        let s = with(&o, &[109.0, 105.0, 109.0, 109.0]);
        let (every, events) = judge_every_night(&s, &r);
        assert!(matches!(every[30], Tonight::Suspect(_)), "{:?}", every[30]);
        assert_eq!(every[31], Tonight::Inside, "{:?}", every[31]);
        assert!(matches!(every[32], Tonight::Suspect(_)), "{:?}", every[32]);
        let Tonight::StepUp(st) = every[33] else {
            panic!("{:?}", every[33])
        };
        assert_eq!((st.first, st.found_at), (30, 33));
        assert_eq!(events.len(), 1);
    }

    #[test]
    fn one_outlier_night_is_a_warn_and_changes_nothing_learned() {
        let r = BandRule::default();
        let o = thirty();
        let quiet = judge(&with(&o, &[101.0]), &r).band.unwrap();
        // a night 1.6x slow, then a normal one: WARN on it, no step, and the band tonight is
        // what it was without it but for the width's median by one rank
        let (every, events) = judge_every_night(&with(&o, &[160.0, 101.0]), &r);
        assert!(matches!(
            every[30],
            Tonight::Suspect(Suspect { nights: 1, .. })
        ));
        assert_eq!(every[31], Tonight::Inside);
        assert!(events.is_empty());
        // the night after it is judged by the band of the nights before it, exactly: the outlier
        // was held out of the level (it rejoins it once this night is inside)
        let after = judge(&with(&o, &[160.0, 101.0]), &r).band.unwrap();
        assert_eq!((after.center, after.nights), (quiet.center, quiet.nights));
        // (the held night takes a place in the width's window of 30 nights and teaches nothing)
        assert_eq!((after.width_nights, quiet.width_nights), (29, 30));
        // and a night later it counts as one of the level's nights: the width's median moves by a
        // rank, and the centre leaves it out (beyond 2.5 widths) where it counted 101
        let later = judge(&with(&o, &[160.0, 101.0, 101.0]), &r).band.unwrap();
        let quiet2 = judge(&with(&o, &[101.0, 101.0, 101.0]), &r).band.unwrap();
        assert_eq!((later.width_nights, later.nights), (30, 30));
        assert_eq!(later.width_nights, quiet2.width_nights);
        assert!(
            (later.width / quiet2.width - 1.0).abs() < 0.05,
            "{later:?} {quiet2:?}"
        );
        assert!(
            (later.center / quiet2.center - 1.0).abs() < 0.01,
            "{later:?} {quiet2:?}"
        );
    }

    #[test]
    fn a_restored_step_stays_restored_and_what_was_learned_is_kept() {
        let r = BandRule::default();
        let o = thirty();
        // +20 % for 4 nights (confirmed, red, on its second; in force, not red, on the next two),
        // then back: the first night back says so (restored if the next is back too), restored
        // on the second night back (both below the midpoint of 100 and 120), never in force
        // again on the same step: a night at +9 % after it is a WARN (outside the band), not the
        // old step again
        let mut tail = vec![120.0, 121.0, 119.0, 120.0, 100.0, 101.0];
        tail.extend([99.0, 109.0, 100.0, 101.0, 99.0, 100.0]);
        let s = with(&o, &tail);
        let (every, events) = judge_every_night(&s, &r);
        let kinds = kinds(&every[30..]);
        assert_eq!(
            kinds,
            vec![
                "warn", "red", "in force", "in force", "back", "restored", "pass", "warn", "pass",
                "pass", "pass", "pass"
            ]
        );
        assert!(matches!(
            events[1],
            Event::Restored {
                at: 35,
                how: Restore::Back,
                ..
            }
        ));
        // the step's nights rejoined the old level: tonight's band is centred on it; of the
        // newest 30 level nights (11..=40), the 4 at +20 % are beyond 2.5 w (w ~ 0.035) of the
        // median and left out; the other 26 are 19 of the +-3 % pattern (logs summing to 0) and
        // 100, 101, 99, 109, 100, 101, 99 (ln sum 0.08598): 100 x e^(0.08598 / 26) = 100.33,
        // not 120
        let j = judge(&s, &r);
        let b = j.band.unwrap();
        assert!((b.center - 100.331).abs() < 1e-3, "{b:?}");
        assert_eq!(b.nights, 30, "{b:?}"); // the window's newest 30 of the 37 nights
        assert_eq!(b.width_nights, 30, "{b:?}");
        assert_eq!(j.level_start, 0);
    }

    #[test]
    fn two_outlier_nights_in_a_row_are_red_on_one_night_only() {
        // an unchanged series with two 1.3x nights in a row: a step confirmed on the second
        // (both far out: what two outlier nights and a +30 % step's first two nights share), the
        // next night back is not red, the one after restores it: one red night, not two
        let r = BandRule::default();
        let s = with(&thirty(), &[130.0, 131.0, 100.0, 101.0, 99.0]);
        let (every, events) = judge_every_night(&s, &r);
        let kinds = kinds(&every[30..]);
        assert_eq!(kinds, vec!["warn", "red", "back", "restored", "pass"]);
        assert_eq!(events.len(), 2, "{events:?}");
    }

    #[test]
    fn a_step_half_back_stays_in_force_without_a_red_night_after_its_first() {
        // two nights at +20 % confirm a step (red on the second); then nights alternate +12 % and
        // 0 %: never two in a row below the midpoint of the old level and the new one's median,
        // so never restored: in force (WARN) every night after, said back on the nights at 0 %,
        // never red again and never restored, and the old level stays the reference
        let r = BandRule::default();
        let mut tail = vec![120.0, 120.0];
        for _ in 0..8 {
            tail.extend([112.0, 100.0]);
        }
        let s = with(&thirty(), &tail);
        let (every, events) = judge_every_night(&s, &r);
        assert!(matches!(every[31], Tonight::StepUp(_)), "{every:?}");
        for (i, t) in every.iter().enumerate().skip(32) {
            match (i % 2, t) {
                (0, Tonight::InForce(_)) | (1, Tonight::StepUpBack(_)) => {}
                _ => panic!("night {i}: {t:?}"),
            }
        }
        assert_eq!(events.len(), 1, "{events:?}");
        let Tonight::StepUpBack(st) = judge(&s, &r).tonight else {
            panic!()
        };
        assert_eq!((st.first, st.found_at), (30, 31));
        assert!((st.old - 100.0).abs() < 1e-9, "{st:?}");
    }

    #[test]
    fn a_big_step_after_two_nights_is_confirmed_on_its_third_and_never_learned() {
        // a fresh history: 100 and 102 ms, then 290 ms every night (a reader's Q4 -> F32 TPOT).
        // Night 2: the prior width 0.05 (2 nights teach nothing), centre ln sqrt(100 x 102),
        // sd 0.05 sqrt(1 + 1.1 / 2) = 0.06225: z = ln(290 / 100.995) / 0.06225 = 16.9, a suspect,
        // held out of the level. Night 3: two nights confirm only once 7 came before, and the
        // clipped mean (1.5) is below the CUSUM's (0.5 + 3.35 / 2) sqrt(1 + 1.1 x 2 / 2) = 3.15:
        // still a suspect. Night 4: three nights all far out, each ln(2.871) / 0.05 / sqrt(1.55)
        // = 16.9 >= 1.8: confirmed, the step's first night 2, 2 nights before it; red that night,
        // in force after.
        let r = BandRule::default();
        let s = [100.0, 102.0, 290.0, 290.0, 290.0, 291.0, 289.0, 290.0];
        let (every, events) = judge_every_night(&s, &r);
        assert!(matches!(
            every[2],
            Tonight::Suspect(Suspect {
                first: 2,
                nights: 1,
                ..
            })
        ));
        assert!(matches!(
            every[3],
            Tonight::Suspect(Suspect {
                first: 2,
                nights: 2,
                ..
            })
        ));
        let Tonight::StepUp(st) = every[4] else {
            panic!("{every:?}")
        };
        assert_eq!((st.first, st.found_at, st.before), (2, 4, 2));
        assert!(
            (st.ratio - 290.0 / (100.0f64 * 102.0).sqrt()).abs() < 1e-9,
            "{st:?}"
        );
        assert!(every[5..].iter().all(|t| matches!(t, Tonight::InForce(_))));
        assert_eq!(events.len(), 1);
        // while a suspect, night 3's band was night 2's: the held night neither moved the centre
        // nor widened it
        let b2 = judge(&s[..3], &r).band.unwrap();
        let b3 = judge(&s[..4], &r).band.unwrap();
        assert_eq!(
            (b2.center, b2.width, b2.nights),
            (b3.center, b3.width, b3.nights)
        );
        assert!((b2.sd - 0.05 * 1.55f64.sqrt()).abs() < 1e-12, "{b2:?}");
    }

    #[test]
    fn a_step_up_back_to_where_a_step_down_came_from_is_not_red() {
        // 30 nights at 100, then 80 (a step down, IMPROVED on its second night: both nights
        // ln 0.8 / w far out), then 100 again: three nights outside the 80-level's band confirm a
        // step up, but its median (100) is not 5 % above where the step down came from (100): the
        // improvement did not last, PASS, not red; 106 would be (6 % above it)
        let r = BandRule::default();
        let s = with(
            &thirty(),
            &[80.0, 80.0, 81.0, 79.0, 80.0, 100.0, 101.0, 99.0, 100.0],
        );
        let (every, events) = judge_every_night(&s, &r);
        assert!(matches!(every[31], Tonight::StepDown(_)), "{every:?}");
        let Tonight::DownUndone(d) = every[37] else {
            panic!("{:?}", every[37])
        };
        assert_eq!((d.first, d.found_at, d.way), (30, 31, Way::Down));
        assert!((d.old - 100.0).abs() < 1.0, "{d:?}");
        assert!(
            !every.iter().any(|t| matches!(t, Tonight::StepUp(_))),
            "{every:?}"
        );
        assert_eq!(events.len(), 2, "{events:?}");
        let s = with(
            &thirty(),
            &[80.0, 80.0, 81.0, 79.0, 80.0, 106.0, 107.0, 106.0],
        );
        let (every, _) = judge_every_night(&s, &r);
        assert!(matches!(every[37], Tonight::StepUp(_)), "{:?}", every[37]);
        // a step down that held 12 nights (more than `max_after`, 10) is the level: going back
        // to 100 from it is a regression, red on its second night (12 nights before it)
        let mut tail = vec![80.0; 12];
        tail.extend([100.0, 101.0, 99.0]);
        let (every, _) = judge_every_night(&with(&thirty(), &tail), &r);
        let Tonight::StepUp(up) = every[43] else {
            panic!("{every:?}")
        };
        assert_eq!((up.first, up.found_at, up.before), (42, 43, 12));
    }

    #[test]
    fn a_restored_false_step_gives_all_its_nights_back() {
        // 30 nights, two at +20 % (a step, red), two back at 100: restored, and the level is the
        // 30 nights and all four (only the nights back would bias the level low)
        let r = BandRule::default();
        let s = with(&thirty(), &[120.0, 120.0, 100.0, 100.0, 100.0]);
        let (every, _) = judge_every_night(&s, &r);
        assert!(
            matches!(every[33], Tonight::Restored(_, Restore::Back)),
            "{every:?}"
        );
        let j = judge(&s, &r);
        assert_eq!(j.level_start, 0);
        let b = j.band.unwrap();
        // the newest 30 of the 34 level nights before tonight (nights 4..=33): 26 of the +-3 %
        // pattern (their logs sum to -0.01), two at 100, and the two +20 % nights, whose ln 1.2
        // = 0.182 is beyond 2.5 w (w = 0.0351) of the median and left out of the centre as an
        // outlier night is: the mean of 28 logs, -0.01 / 28, is 100 x e^-0.000357 = 99.964
        assert_eq!(b.nights, 30, "{b:?}");
        assert!((b.center - 99.9643).abs() < 1e-3, "{b:?}");
    }
}
