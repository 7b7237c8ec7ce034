//! The known name nearest to a mistyped one, for the "did you mean" of an error about an
//! unknown option (the lock's options, the storage options).

/// The name in `names` within two edits of `given` (or that starts with it, when at least
/// three characters were typed), the nearest first.
pub(crate) fn nearest<'a>(
    given: &str,
    names: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    names
        .into_iter()
        .map(|n| (distance(given, n), n))
        .filter(|(d, n)| *d <= 2 || (given.len() >= 3 && n.starts_with(given)))
        .min()
        .map(|(_, n)| n)
}

/// Edit distance between two short names.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let here = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb))
                .min(row[j] + 1)
                .min(here + 1);
            prev = here;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_a_typo_and_a_prefix_but_not_a_stranger() {
        let names = ["aws_secret_access_key", "aws_access_key_id", "expire"];
        assert_eq!(
            nearest("aws_secret_acces_key", names),
            Some("aws_secret_access_key")
        );
        assert_eq!(nearest("exp", names), Some("expire"));
        assert_eq!(nearest("colour", names), None);
    }
}
