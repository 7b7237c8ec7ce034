//! The semaphore's oracle, on the true history of the simulated world: never two holders on
//! one slot, each slot's tokens growing, never more holders at once than the most slots ever
//! stored; no slot above 0 reported held unless the stored number was above it at some
//! moment between the slot's write landing and the report (so, once `set_slots` lowered it,
//! no slot at or above the new number is held anew); and the configuration written only by
//! the operator, or once by the first of the racing first-comers, never again by a
//! contender after it was lost.

use super::*;
use blob_lock::semaphore::config::CONFIG_NAME;

/// Everything the oracle checks of one run with `change`; `stale_for` is how far the
/// contenders' reads of the slots may lag.
pub fn check_semaphore(world: &World, change: Change, stale_for: Duration) -> Vec<String> {
    let events = world.events.lock().unwrap();
    let config = config_history(world);
    let most = config.iter().filter_map(|c| c.1).max().unwrap_or(SLOTS);
    let mut v = check_slots(&events, most);
    v.extend(numbers_kept(world, &events, &config));
    v.extend(config_written_by_whom(world, &events, change, stale_for));
    v
}

/// The configuration over true time: when each write landed, and the number it stored
/// (`None`: deleted or unreadable).
fn config_history(world: &World) -> Vec<(f64, Option<usize>)> {
    let history = world.object(CONFIG_NAME);
    let history = history.lock().unwrap();
    history
        .iter()
        .map(|s| {
            let slots = serde_json::from_slice::<serde_json::Value>(&s.bytes)
                .ok()
                .and_then(|v| v.get("slots").and_then(serde_json::Value::as_u64))
                .map(|n| n as usize);
            ((s.at - world.start).as_secs_f64(), slots)
        })
        .collect()
}

/// No slot above 0 is reported held unless the stored number was above it at some moment
/// between the write that won it and the report.
fn numbers_kept(world: &World, events: &[Event], config: &[(f64, Option<usize>)]) -> Vec<String> {
    let mut v = Vec::new();
    for e in events {
        let Event::SlotAcquired {
            who,
            slot,
            token,
            at,
        } = e
        else {
            continue;
        };
        if *slot == 0 || who == "last" {
            continue;
        }
        let history = world.object(&format!("slot-{slot}"));
        let won = history.lock().unwrap().iter().find_map(|s| {
            let lf = blob_lock::LockFile::decode(&s.bytes).ok()?;
            (&*lf.writer_id == who && lf.token == *token && !lf.is_released())
                .then(|| (s.at - world.start).as_secs_f64())
        });
        let Some(won) = won else { continue };
        // The number in effect when the write landed, and every number stored until the report.
        let before = config.iter().rev().find(|c| c.0 <= won).and_then(|c| c.1);
        let during = config.iter().filter(|c| won < c.0 && c.0 <= *at);
        let above = before.into_iter().chain(during.filter_map(|c| c.1));
        if !above.clone().any(|n| n > *slot) {
            v.push(format!(
                "{who} was reported holding slot {slot} at {at:.3}s, but from its write at {won:.3}s on the stored number was never above it ({:?})",
                above.collect::<Vec<_>>()
            ));
        }
    }
    v
}

/// The configuration is written by the operator (counted by its events), and at most once
/// by a contender when none was there at first; never by a contender after it was lost
/// where slots had been taken before (allowing for reads of the slots that lag by
/// `stale_for`, which listings on real stores do not).
fn config_written_by_whom(
    world: &World,
    events: &[Event],
    change: Change,
    stale_for: Duration,
) -> Vec<String> {
    let history = world.object(CONFIG_NAME);
    let history = history.lock().unwrap();
    let at = |s: &Stored| (s.at - world.start).as_secs_f64();
    let mut operator: Vec<f64> = events
        .iter()
        .filter_map(|e| match e {
            Event::ConfigWritten { at } => Some(*at),
            _ => None,
        })
        .collect();
    operator.sort_by(f64::total_cmp);
    let initial = usize::from(change != Change::FirstWrites);
    // When the loss landed: the operator's event comes once its call has returned, and a
    // contender may have read the loss (and been refused) before that.
    let lost = events.iter().find_map(|e| match e {
        Event::ConfigLost { at } => Some(*at),
        _ => None,
    });
    let lost = lost.map(|event| {
        let no_configuration = |s: &Stored| {
            serde_json::from_slice::<serde_json::Value>(&s.bytes)
                .map_or(true, |v| v.get("slots").is_none())
        };
        (history.iter().skip(initial))
            .filter(|s| no_configuration(s))
            .map(at)
            .find(|&landed| landed <= event)
            .unwrap_or(event)
    });
    let writes: Vec<f64> = history.iter().skip(initial).map(at).collect();
    // Each operator write landed before its event: pair them off in order.
    let mut contenders = Vec::new();
    let mut ops = operator.iter().peekable();
    for w in writes {
        match ops.peek() {
            Some(&&o) if w <= o => {
                ops.next();
            }
            _ => contenders.push(w),
        }
    }
    // Slots taken before the loss, by what the contenders' reads could have seen of them.
    let taken_before = lost.is_some_and(|lost| {
        (0..=SLOTS).any(|i| {
            let slot = world.object(&format!("slot-{i}"));
            let slot = slot.lock().unwrap();
            slot.first()
                .is_some_and(|s| at(s) < lost - stale_for.as_secs_f64())
        })
    });
    let mut v = Vec::new();
    // Once by the racing first-comers; once after a loss that no read could tell from a
    // semaphore never used.
    let allowed =
        usize::from(change == Change::FirstWrites) + usize::from(lost.is_some() && !taken_before);
    if contenders.len() > allowed {
        v.push(format!(
            "the configuration was written by contenders at {contenders:.3?}s ({allowed} allowed: {change:?})"
        ));
    }
    // Refused as lost only once it was: a first-comer that found the configuration missing
    // and then another's slot is not looking at a lost one.
    for e in events {
        if let Event::ConfigRefused { at } = e {
            if lost.is_none_or(|lost| *at < lost) {
                v.push(format!(
                    "a contender was refused at {at:.3}s as if the configuration were lost ({})",
                    lost.map_or("it never was".into(), |l| format!("it was lost at {l:.3}s"))
                ));
            }
        }
    }
    if let (Some(lost), true) = (lost, taken_before) {
        if let Some(w) = contenders.iter().find(|&&w| w > lost) {
            v.push(format!(
                "the configuration, lost at {lost:.3}s after slots were taken, was written again by a contender at {w:.3}s"
            ));
        }
    }
    v
}

/// Never two holders on one slot at once, never more than `limit` holders at once, and each
/// slot's tokens growing (on the events of true time).
pub fn check_slots(events: &[Event], limit: usize) -> Vec<String> {
    // Each acquisition's belief: its slot, token and first and last moment.
    let mut spans: Vec<(&str, usize, u64, f64, f64)> = Vec::new();
    for e in events {
        if let Event::SlotBelief {
            who,
            slot,
            token,
            at,
        } = e
        {
            match spans.iter_mut().find(|s| s.0 == who.as_str()) {
                Some(s) => s.4 = s.4.max(*at),
                None => spans.push((who, *slot, *token, *at, *at)),
            }
        }
    }
    let mut v = Vec::new();
    for (i, a) in spans.iter().enumerate() {
        for b in &spans[i + 1..] {
            if a.1 == b.1 && a.3 <= b.4 && b.3 <= a.4 {
                v.push(format!(
                    "{} (token {}) and {} (token {}) both held slot {} in [{:.3}s, {:.3}s]",
                    a.0,
                    a.2,
                    b.0,
                    b.2,
                    a.1,
                    a.3.max(b.3),
                    a.4.min(b.4)
                ));
            }
        }
        let at_once: Vec<_> = (spans.iter())
            .filter(|b| b.3 <= a.3 && a.3 <= b.4)
            .map(|b| format!("{} on slot {}", b.0, b.1))
            .collect();
        if at_once.len() > limit {
            v.push(format!(
                "{} holders of {limit} slots at {:.3}s: {}",
                at_once.len(),
                a.3,
                at_once.join(", ")
            ));
        }
    }
    let mut acquired: Vec<(f64, &str, usize, u64)> = (events.iter())
        .filter_map(|e| match e {
            Event::SlotAcquired {
                who,
                slot,
                token,
                at,
            } => Some((*at, who.as_str(), *slot, *token)),
            _ => None,
        })
        .collect();
    acquired.sort_by(|a, b| a.0.total_cmp(&b.0));
    for (i, later) in acquired.iter().enumerate() {
        let earlier = acquired[..i].iter().rev().find(|e| e.2 == later.2);
        if let Some(earlier) = earlier.filter(|e| later.3 <= e.3) {
            v.push(format!(
                "slot {}'s token did not grow: {} got {} at {:.3}s after {} got {} at {:.3}s",
                later.2, later.1, later.3, later.0, earlier.1, earlier.3, earlier.0
            ));
        }
    }
    v
}
