//! Conformance cases of the text search the list ports share (`q`).

use std::sync::Arc;

use crm_app::{
    ports::{CompanyFilter, ContactFilter, Slice},
    Store,
};
use crm_domain::{Contact, ContactId};

use crate::fixtures::*;

pub async fn substring_search_matches_short_and_long_needles(store: Arc<dyn Store>) {
    let (_, t) = setup(&store).await;
    let mut ada = contact(Some("ada@analytical.engine"));
    ada.phone = Some("+44 20 7946 0000".into());
    let mut grace = contact(Some("grace@navy.mil"));
    grace.first_name = Some("Grace".into());
    grace.last_name = Some("Hopper".into());
    let acme = company("Acme Rockets", Some("acme.io"));
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_contact(&t, &ada, &[]).await.unwrap();
    tx.insert_contact(&t, &grace, &[]).await.unwrap();
    tx.insert_company(&t, &acme).await.unwrap();
    tx.commit().await.unwrap();
    let mut tx = store.begin_read().await.unwrap();
    for (q, expected) in [
        ("lovelace", vec![ada.id.clone()]),
        ("ANALYTICAL", vec![ada.id.clone()]),
        ("7946", vec![ada.id.clone()]),
        ("ho", vec![grace.id.clone()]),
        ("e", vec![grace.id.clone(), ada.id.clone()]),
        ("\"quoted\"", vec![]),
    ] {
        let got: Vec<_> = tx
            .list_contacts(
                &t,
                &ContactFilter {
                    q: Some(q.into()),
                    ..Default::default()
                },
                &all(),
            )
            .await
            .unwrap()
            .into_iter()
            .map(|c| c.id)
            .collect();
        assert_eq!(got, expected, "q={q}");
    }
    drop(tx);
    // The index follows updates.
    let mut tx = store.begin_write().await.unwrap();
    grace.last_name = Some("Brewster".into());
    grace.version = 2;
    tx.update_contact(&t, &grace).await.unwrap();
    tx.commit().await.unwrap();
    let mut tx = store.begin_read().await.unwrap();
    assert!(tx
        .list_contacts(
            &t,
            &ContactFilter {
                q: Some("hopper".into()),
                ..Default::default()
            },
            &all()
        )
        .await
        .unwrap()
        .is_empty());
    assert_eq!(
        tx.list_contacts(
            &t,
            &ContactFilter {
                q: Some("brewster".into()),
                ..Default::default()
            },
            &all()
        )
        .await
        .unwrap()
        .len(),
        1
    );
    assert_eq!(
        tx.list_companies(
            &t,
            &CompanyFilter {
                q: Some("rocket".into()),
                ..Default::default()
            },
            &all()
        )
        .await
        .unwrap()
        .len(),
        1
    );
    assert_eq!(
        tx.list_companies(
            &t,
            &CompanyFilter {
                q: Some("io".into()),
                ..Default::default()
            },
            &all()
        )
        .await
        .unwrap()
        .len(),
        1
    );
}

/// A search whose matches lie beyond the tenant's newest thousand rows, where the Postgres store
/// turns from walking the newest rows to the trigram index: every match comes back once, newest
/// first, across pages.
pub async fn a_search_finds_matches_among_old_rows_newest_first_across_pages(
    store: Arc<dyn Store>,
) {
    let (_, t) = setup(&store).await;
    // First, so older than all the rows below (ids are time-ordered), 5,001 rows of an old
    // import: a needle common among old rows but absent from the newest, with more matches than
    // a search's capped trigram read takes.
    let legacy: Vec<Contact> = (0..5_001)
        .map(|i| {
            let mut c = contact(None);
            c.first_name = Some(format!("Imported {i}"));
            c.last_name = Some("Legacy".into());
            c
        })
        .collect();
    let rows: Vec<Contact> = (0..1_100)
        .map(|i| {
            let mut c = contact(None);
            c.first_name = Some(format!("Filler {i}"));
            c.last_name = Some(if [10, 20, 50, 99, 100, 1_090].contains(&i) {
                "Needleman".into()
            } else {
                "Row".into()
            });
            if i == 20 {
                c.deleted_at = Some(c.updated_at);
            }
            c
        })
        .collect();
    let mut tx = store.begin_write().await.unwrap();
    for chunk in legacy.chunks(500).chain(rows.chunks(500)) {
        let refs: Vec<&Contact> = chunk.iter().collect();
        assert_eq!(
            tx.insert_contacts(&t, &refs).await.unwrap().len(),
            chunk.len()
        );
    }
    tx.commit().await.unwrap();
    let id = |i: usize| rows[i].id.clone();
    let needle = ContactFilter {
        q: Some("needle".into()),
        ..Default::default()
    };
    let mut tx = store.begin_read().await.unwrap();
    let mut find =
        async |filter: &ContactFilter, before: Option<usize>, limit: u32| -> Vec<ContactId> {
            let slice = Slice {
                before: before.map(|i| id(i).to_string()),
                limit,
            };
            tx.list_contacts(&t, filter, &slice)
                .await
                .unwrap()
                .into_iter()
                .map(|c| c.id)
                .collect()
        };
    // The newest thousand rows are 100 to 1,099; 99 is the newest row older than them.
    assert_eq!(
        find(&needle, None, 10).await,
        vec![id(1_090), id(100), id(99), id(50), id(10)]
    );
    assert_eq!(find(&needle, None, 2).await, vec![id(1_090), id(100)]);
    assert_eq!(
        find(&needle, None, 3).await,
        vec![id(1_090), id(100), id(99)]
    );
    assert_eq!(
        find(&needle, Some(1_090), 10).await,
        vec![id(100), id(99), id(50), id(10)]
    );
    assert_eq!(find(&needle, Some(100), 1).await, vec![id(99)]);
    assert_eq!(find(&needle, Some(50), 10).await, vec![id(10)]);
    assert_eq!(find(&needle, Some(10), 10).await, vec![]);
    let with_deleted = ContactFilter {
        include_deleted: true,
        ..needle.clone()
    };
    assert_eq!(
        find(&with_deleted, None, 10).await,
        vec![id(1_090), id(100), id(99), id(50), id(20), id(10)]
    );
    let common = ContactFilter {
        q: Some("row".into()),
        ..Default::default()
    };
    assert_eq!(
        find(&common, None, 3).await,
        vec![id(1_099), id(1_098), id(1_097)]
    );
    let old_import = ContactFilter {
        q: Some("legacy".into()),
        ..Default::default()
    };
    let newest_legacy: Vec<ContactId> = legacy.iter().rev().take(3).map(|c| c.id.clone()).collect();
    assert_eq!(find(&old_import, None, 3).await, newest_legacy);
    drop(tx);

    // A tenant with fewer rows than a search's window, beside this large one: its search sees
    // only its own rows, and the large tenant's none of them.
    let (_, small) = setup(&store).await;
    let own: Vec<Contact> = ["Needleman", "Row", "Needleman"]
        .into_iter()
        .map(|last| {
            let mut c = contact(None);
            c.last_name = Some(last.into());
            c
        })
        .collect();
    let mut tx = store.begin_write().await.unwrap();
    assert_eq!(
        tx.insert_contacts(&small, &own.iter().collect::<Vec<_>>())
            .await
            .unwrap()
            .len(),
        3
    );
    tx.commit().await.unwrap();
    let mut tx = store.begin_read().await.unwrap();
    let found = |contacts: Vec<Contact>| contacts.into_iter().map(|c| c.id).collect::<Vec<_>>();
    let page = |limit| Slice {
        before: None,
        limit,
    };
    assert_eq!(
        found(tx.list_contacts(&small, &needle, &page(10)).await.unwrap()),
        vec![own[2].id.clone(), own[0].id.clone()]
    );
    assert_eq!(
        found(
            tx.list_contacts(&small, &old_import, &page(10))
                .await
                .unwrap()
        ),
        vec![]
    );
    assert_eq!(
        found(tx.list_contacts(&t, &needle, &page(10)).await.unwrap()),
        vec![id(1_090), id(100), id(99), id(50), id(10)]
    );
}
