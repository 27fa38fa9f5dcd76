//! Round schedules for node-pair sweeps: which pairs run together.
//!
//! A round is a set of node-disjoint pairs that run at the same time; the next round
//! starts when the previous one has ended. Disjointness holds by construction, so no node
//! is ever in two tests at once and the numbers of one pair are not disturbed by another.
//!
//! Nodes are indexes into the sorted node list; a pair `(a, b)` puts the first role on
//! `a` and the second on `b`.

/// One round: node-disjoint `(first role's node, second role's node)` pairs.
pub type Round = Vec<(usize, usize)>;

/// Every unordered pair of `n` nodes exactly once, by the circle method: node `n-1`
/// (or a "bye" for odd `n`) stays put while the others rotate one place per round. Even
/// `n`: `n-1` rounds of `n/2` pairs; odd `n`: `n` rounds of `(n-1)/2` pairs, one node
/// sitting out each round.
pub fn all_pairs(n: usize) -> Vec<Round> {
    if n < 2 {
        return Vec::new();
    }
    // With odd n a phantom node `n` makes the count even; its partner sits out.
    let slots = n + n % 2;
    let fixed = slots - 1;
    let rotating = slots - 1;
    (0..rotating)
        .map(|round| {
            let at = |position: usize| (round + position) % rotating;
            let mut pairs = Vec::with_capacity(slots / 2);
            // The fixed slot meets the node at position 0 of the rotation.
            pairs.push((at(0), fixed));
            for k in 1..slots / 2 {
                pairs.push((at(k), at(rotating - k)));
            }
            pairs
                .into_iter()
                .filter(|&(a, b)| a < n && b < n)
                .map(|(a, b)| (a.min(b), a.max(b)))
                .collect()
        })
        .collect()
}

/// Each node with its successor in name order (the last with the first): `n` tests, each
/// node once sending to its successor and once receiving from its predecessor. Even `n`
/// needs 2 rounds (alternate links); odd `n` needs 3, since a ring of odd length cannot
/// be split into two sets of disjoint links: the closing link gets a round of its own.
/// Two nodes have one link, tested once.
pub fn ring(n: usize) -> Vec<Round> {
    if n < 2 {
        return Vec::new();
    }
    if n == 2 {
        return vec![vec![(0, 1)]];
    }
    let link = |i: usize| (i, (i + 1) % n);
    let mut rounds = vec![
        (0..n)
            .step_by(2)
            .filter(|&i| n.is_multiple_of(2) || i + 1 < n)
            .map(link)
            .collect(),
        (1..n).step_by(2).map(link).collect::<Round>(),
    ];
    if !n.is_multiple_of(2) {
        rounds.push(vec![link(n - 1)]);
    }
    rounds
}

/// Every other node against `reference`: one pair per round, since the reference is in
/// every pair.
pub fn against_reference(n: usize, reference: usize) -> Vec<Round> {
    (0..n)
        .filter(|&i| i != reference)
        .map(|i| vec![(reference, i)])
        .collect()
}

/// Both directions: each round followed by the same pairs with the roles swapped.
pub fn both_directions(rounds: Vec<Round>) -> Vec<Round> {
    rounds
        .into_iter()
        .flat_map(|round| {
            let reversed = round.iter().map(|&(a, b)| (b, a)).collect();
            [round, reversed]
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn disjoint(round: &Round) -> bool {
        let mut seen = BTreeSet::new();
        round.iter().all(|&(a, b)| seen.insert(a) && seen.insert(b))
    }

    #[test]
    fn ring_covers_each_successor_link_once_in_disjoint_rounds() {
        for n in 2..40 {
            let rounds = ring(n);
            let expected_rounds = match n {
                2 => 1,
                _ if n.is_multiple_of(2) => 2,
                _ => 3,
            };
            assert_eq!(rounds.len(), expected_rounds, "n={n}");
            assert!(rounds.iter().all(disjoint), "n={n}: {rounds:?}");
            let links: BTreeSet<(usize, usize)> = rounds.iter().flatten().copied().collect();
            let expected: BTreeSet<(usize, usize)> = if n == 2 {
                [(0, 1)].into()
            } else {
                (0..n).map(|i| (i, (i + 1) % n)).collect()
            };
            assert_eq!(links, expected, "n={n}");
            assert_eq!(rounds.iter().map(Vec::len).sum::<usize>(), expected.len());
        }
    }

    #[test]
    fn both_directions_swaps_roles_in_the_following_round() {
        let rounds = both_directions(all_pairs(4));
        assert_eq!(rounds.len(), 6);
        for pair in rounds.chunks(2) {
            let swapped: Round = pair[0].iter().map(|&(a, b)| (b, a)).collect();
            assert_eq!(pair[1], swapped);
        }
    }

    #[test]
    fn against_reference_is_one_pair_a_round() {
        assert_eq!(
            against_reference(4, 2),
            vec![vec![(2, 0)], vec![(2, 1)], vec![(2, 3)]]
        );
    }
}
