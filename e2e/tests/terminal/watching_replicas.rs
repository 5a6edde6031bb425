//! Watching on any replica: a watcher on the replica that does not serve the terminal is
//! forwarded to the one that does, and follows the terminal when it moves.

use super::replicas::{open_terminal, two_replicas};
use super::watching::{last_watchers, read_while, type_in, watch};
use super::*;

#[tokio::test]
async fn a_watcher_on_either_replica_sees_the_terminal_wherever_it_is_served() {
    let (a, b, _dir, _cfg, ns, _shared) = two_replicas("").await;
    let (alice_a, id) = request(&a, &ns).await;
    alice_a.wait_state(&id, &["Active"], T).await.unwrap();
    let mut term = open_terminal(&a, &alice_a, &id)
        .await
        .unwrap_or_else(|e| panic!("{e:?}\n{}", a.log_text()));
    type_in(&mut term, "echo served-on-a-$((1+2))\r").await;
    let _ = read_while(&mut term, |s| s.text.contains("served-on-a-3")).await;

    // bob watches through B; A serves the terminal, and bob sees its screen and its stream.
    let bob_b = b.login("bob").await.unwrap();
    let mut watcher = watch(&b, &bob_b, &id).await;
    let first = read_while(&mut watcher, |s| s.text.contains("served-on-a-3")).await;
    assert!(
        first.closed.is_none(),
        "{first:?}\n{}\n{}",
        a.log_text(),
        b.log_text()
    );
    let told = read_while(&mut term, |s| {
        last_watchers(s).is_some_and(|w| w == &["bob"])
    })
    .await;
    assert!(told.closed.is_none(), "{told:?}");
    type_in(&mut term, "echo streamed-$((4*4))\r").await;
    let live = read_while(&mut watcher, |s| s.text.contains("streamed-16")).await;
    assert!(live.closed.is_none(), "{live:?}");
    // What bob sends through B reaches nobody.
    type_in(&mut watcher, "echo from-bob-$((9*9))\r").await;
    type_in(&mut term, "echo checked-$((2*5))\r").await;
    let after = read_while(&mut term, |s| s.text.contains("checked-10")).await;
    assert!(!after.text.contains("from-bob-81"), "{after:?}");

    // alice's terminal moves to B: bob's view through B is told so, and watching again on B
    // is served there.
    let alice_b = b.login("alice").await.unwrap();
    let mut term_b = open_terminal(&b, &alice_b, &id)
        .await
        .unwrap_or_else(|e| panic!("{e:?}\n{}\n{}", a.log_text(), b.log_text()));
    let moved = read_while(&mut watcher, |_| false).await;
    assert_eq!(
        moved.closed.as_ref().map(|c| c.0),
        Some(close::MOVED),
        "{moved:?}"
    );
    let mut watcher = watch(&b, &bob_b, &id).await;
    type_in(&mut term_b, "echo now-on-b-$((6*7))\r").await;
    let again = read_while(&mut watcher, |s| s.text.contains("now-on-b-42")).await;
    assert!(again.closed.is_none(), "{again:?}\n{}", b.log_text());

    end_and_wait(&alice_b, &id).await;
    let (_, events) = recording_of(&alice_b, &id).await;
    assert!(!output_of(&events).contains("from-bob-81"));
    let markers = markers_of(&events);
    assert!(
        markers.iter().filter(|m| **m == "watching: bob").count() >= 2,
        "{markers:?}"
    );
}

#[tokio::test]
async fn a_forged_pass_opens_no_watch_socket() {
    let (a, _b, _dir, _cfg, ns, _shared) = two_replicas("").await;
    let (alice, id) = request(&a, &ns).await;
    alice.wait_state(&id, &["Active"], T).await.unwrap();
    let url = format!(
        "{}/api/breakglass/replica/watch/{id}",
        a.url.replace("http://", "ws://")
    );
    for pass in [None, Some("e30.00"), Some("not-a-pass")] {
        let mut req = url.as_str().into_client_request().unwrap();
        if let Some(p) = pass {
            req.headers_mut()
                .insert("x-breakglass-watch-pass", p.parse().unwrap());
        }
        match tokio_tungstenite::connect_async(req).await {
            Err(tokio_tungstenite::tungstenite::Error::Http(res)) => {
                assert_eq!(res.status().as_u16(), 403, "{pass:?}");
            }
            other => panic!("{pass:?} opened something: {:?}", other.map(|_| ())),
        }
    }
}
