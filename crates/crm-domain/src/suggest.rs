//! "Did you mean …?": the closest candidate to a misspelt name.

/// Optimal string alignment distance (Levenshtein plus adjacent transpositions).
pub fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            d[i][j] = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d[i][j] = d[i][j].min(d[i - 2][j - 2] + 1);
            }
        }
    }
    d[a.len()][b.len()]
}

/// The candidate closest to `name`, if it is close enough to be a plausible typo: within a third
/// of the name's length (at least 2 edits), or one contains the other.
pub fn closest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let lower = name.to_ascii_lowercase();
    let budget = (lower.chars().count() / 3).max(2);
    candidates
        .into_iter()
        .map(|c| {
            let d = edit_distance(&lower, &c.to_ascii_lowercase());
            let contained =
                c.len() >= 3 && lower.len() >= 3 && (c.contains(&lower) || lower.contains(c));
            (if contained { d.min(budget) } else { d }, c)
        })
        .filter(|(d, _)| *d <= budget)
        .min_by_key(|(d, c)| (*d, c.len()))
        .map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_typos() {
        let fields = [
            "first_name",
            "last_name",
            "email",
            "phone",
            "linkedin_url",
            "company_id",
        ];
        assert_eq!(closest("frist_name", fields), Some("first_name"));
        assert_eq!(closest("emial", fields), Some("email"));
        assert_eq!(closest("linkedin", fields), Some("linkedin_url"));
        assert_eq!(closest("zzzzzzzz", fields), None);
    }

    #[test]
    fn distance_basics() {
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("abc", "acb"), 1);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }
}
