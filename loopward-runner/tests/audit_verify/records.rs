//! A record edited, deleted, reordered, cut, re-hashed, re-chained or spliced is caught at its
//! sequence number; a ledger of another schema is named as such.

use super::*;

#[tokio::test]
async fn an_intact_finished_ledger_verifies_against_its_anchor_and_names_its_key() {
    let (_ws, _runs, dir) = finished().await;
    let ok = verify(&dir, &keyed()).unwrap();
    assert!(ok.anchored);
    assert_eq!(ok.anchors, 1);
    assert_eq!(ok.final_seq, lines(&dir).len() as u64);
    assert_eq!(ok.mac, "hmac-sha256");
    assert_eq!(ok.schema, 3);
    assert_eq!(ok.verified_by(), format!("key {}", the_key().id()));
    // The first record names the schema and the key, under its MAC.
    let first = parse(&lines(&dir)[0]);
    let header = first.ledger.unwrap();
    assert_eq!(
        (header.schema, header.key.as_ref()),
        (3, Some(the_key().id()))
    );
    assert!(parse(&lines(&dir)[1]).ledger.is_none());
}

#[tokio::test]
async fn a_flipped_byte_is_caught_as_edited_at_its_seq() {
    let (_ws, _runs, dir) =
        edited(|l| l[4] = l[4].replacen("\"time\":\"2026", "\"time\":\"2027", 1)).await;
    assert_eq!(breach(&dir), (5, Breach::Edited));
    let msg = verify(&dir, &keyed()).unwrap_err().to_string();
    assert!(msg.contains("seq 5: edited"), "{msg}");
}

#[tokio::test]
async fn a_deleted_line_is_caught_as_missing() {
    let (_ws, _runs, dir) = edited(|l| {
        l.remove(6);
    })
    .await;
    assert_eq!(breach(&dir), (7, Breach::Missing { found: 8 }));
}

#[tokio::test]
async fn swapped_lines_are_caught_as_reordered() {
    let (_ws, _runs, dir) = edited(|l| l.swap(3, 4)).await;
    assert_eq!(breach(&dir), (4, Breach::Reordered { found: 5 }));
}

#[tokio::test]
async fn a_truncated_ledger_is_caught_against_its_anchor() {
    let (_ws, _runs, dir) = finished().await;
    let mut l = lines(&dir);
    let n = l.len() as u64;
    l.truncate(l.len() - 2);
    write_lines(&dir, &l);
    assert_eq!(
        breach(&dir),
        (
            n - 1,
            Breach::Truncated {
                last: n - 2,
                anchored: n
            }
        )
    );
}

#[tokio::test]
async fn a_truncated_and_rechained_keyless_ledger_is_caught_as_anchor_mismatch() {
    let (_ws, _runs, dir) = finished_run(None).await;
    let mut l = lines(&dir);
    let n = l.len();
    // Drop the last three records and forge three new ones, correctly chained.
    let tail: Vec<Record> = l.split_off(n - 3).iter().map(|s| parse(s)).collect();
    let mut prev = parse(&l[n - 4]).hash;
    for r in &tail {
        let forged = match r.event().unwrap() {
            AuditEvent::TurnEnded {
                finish,
                mut usage,
                ends_run,
            } => {
                usage.output_tokens = 0;
                AuditEvent::TurnEnded {
                    finish,
                    usage,
                    ends_run,
                }
            }
            AuditEvent::RunEnded {
                status,
                mut usage,
                cost_micros,
            } => {
                usage.input_tokens = 1;
                AuditEvent::RunEnded {
                    status,
                    usage,
                    cost_micros,
                }
            }
            e => e,
        };
        let (rec, line) = reseal(r, &forged, &prev);
        prev = rec.hash;
        l.push(line);
    }
    write_lines(&dir, &l);
    // Every record checks out on its own; only the anchor shows the rewrite.
    assert_eq!(
        breach_with(&dir, &VerifyOptions::keyless()),
        (n as u64, Breach::AnchorMismatch { line: 1 })
    );
}

#[tokio::test]
async fn an_edited_and_rehashed_record_breaks_the_next_link() {
    // Keyless, so the forger can re-hash the record; the next link still breaks.
    let (_ws, _runs, dir) = finished_run(None).await;
    forge_third_record(&dir);
    assert_eq!(
        breach_with(&dir, &VerifyOptions::keyless()),
        (4, Breach::BadLink)
    );
    // Keyed, the re-hashed record itself is caught.
    let (_ws, _runs, dir) = finished().await;
    forge_third_record(&dir);
    assert_eq!(breach(&dir), (3, Breach::Edited));
}

#[tokio::test]
async fn an_unparseable_line_is_named() {
    let (_ws, _runs, dir) = edited(|l| l[1] = "{not json".into()).await;
    let (seq, b) = breach(&dir);
    assert_eq!(seq, 2);
    assert!(matches!(b, Breach::Unparseable(_)), "{b:?}");
}

#[tokio::test]
async fn an_hmac_chain_needs_its_key_and_cannot_be_rechained_without_it() {
    let (_ws, _runs, dir) = finished().await;
    assert!(matches!(
        verify(&dir, &VerifyOptions::default()),
        Err(VerifyError::KeyNotHeld { ref key, .. }) if key == the_key().id()
    ));
    // A ring without the ledger's key: named, with the way out.
    let other = VerifyOptions::keyed(KeyRing::single(
        LedgerKey::from_bytes(vec![9u8; 32]).unwrap(),
    ));
    let msg = verify(&dir, &other).unwrap_err().to_string();
    assert!(
        msg.contains("does not hold") && msg.contains("--key"),
        "{msg}"
    );
    // A forger re-chains the last record with plain SHA-256: the key catches it.
    let mut l = lines(&dir);
    let last = parse(l.last().unwrap());
    let (_, forged) = reseal(&last, &last.event().unwrap(), &last.prev);
    *l.last_mut().unwrap() = forged;
    write_lines(&dir, &l);
    let err = verify(&dir, &keyed()).unwrap_err();
    assert_eq!(err.breach(), Some(&Breach::Edited));
    assert_eq!(err.first_bad_seq(), Some(l.len() as u64));
}

/// Re-chains a whole ledger with `chain` (a forger's: keyless, or their own key).

#[tokio::test]
async fn a_second_header_spliced_into_a_ledger_is_caught() {
    let (_ws, _runs, dir) = finished().await;
    let mut l = lines(&dir);
    let first = parse(&l[0]);
    let third = parse(&l[2]);
    // Seal record 1's content as if it were record 3, so it carries no header... then the
    // reverse: a header-bearing first record moved to position 3 breaks the sequence anyway.
    let (rec, bytes) = Record::seal(
        &Chain::Hmac(the_key()),
        1,
        &third.time,
        &third.scope(),
        &third.event().unwrap(),
        &first.prev,
    )
    .unwrap();
    assert!(rec.ledger.is_some());
    l[0] = String::from_utf8(bytes).unwrap().trim_end().to_string();
    write_lines(&dir, &l);
    // The new first record is well-formed and keyed; the chain from record 2 on breaks.
    assert_eq!(breach(&dir), (2, Breach::BadLink));
}

/// A ledger whose header names another schema is refused as such (which loopward wrote it),
/// not reported as a tampered header, and never as verified.
#[tokio::test]
async fn a_ledger_of_another_schema_is_named_as_such() {
    let (_ws, _runs, dir) =
        edited(|l| l[0] = l[0].replacen("\"schema\":3", "\"schema\":2", 1)).await;
    let err = verify(&dir, &keyed()).unwrap_err();
    assert!(
        matches!(
            err,
            loopward_runner::audit::VerifyError::OtherSchema { schema: 2, .. }
        ),
        "{err}"
    );
    assert!(
        err.to_string().contains("written by an older loopward"),
        "{err}"
    );
}
