//! Signing in with a passphrase: the same session as the token's link, refused when wrong or
//! cross-site, and slowed after too many wrong ones.

use crate::support::{Fixture, JSON};
use axum::http::StatusCode;
use loopward_console::passphrase::MAX_WRONG;

const PASSPHRASE: &str = "correct horse battery staple";

fn fixture() -> Fixture {
    Fixture::with(|o| o.set_passphrase = Some(PASSPHRASE.into()))
}

#[tokio::test]
async fn the_right_passphrase_signs_in_with_the_tokens_session_and_a_wrong_one_does_not() {
    let f = fixture();
    let kept = std::fs::read_to_string(f.state().join("console/passphrase")).unwrap();
    assert!(kept.starts_with("$argon2id$") && !kept.contains("horse"));
    // The sign-in page, for a browser with no token.
    let (status, _, page) = f.get("/login", None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(page.contains(r#"name="passphrase""#), "{page}");
    // Wrong: refused, no cookie, the form again saying so.
    let (status, headers, page) = f
        .post(
            "/login",
            None,
            "passphrase=correct+horse+battery+stable",
            &[],
        )
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(headers.get("set-cookie").is_none());
    assert!(page.contains("wrong passphrase"), "{page}");
    // From another site: refused before it is checked.
    let form = "passphrase=correct+horse+battery+staple";
    let (status, headers, _) = f
        .post("/login", None, form, &[("origin", "http://evil.example")])
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(headers.get("set-cookie").is_none());
    // Right: the token's own session cookie.
    let (status, headers, _) = f.post("/login", None, form, &[]).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    let cookie = headers["set-cookie"].to_str().unwrap();
    let by_token = f.sign_in().await;
    assert!(cookie.starts_with(&format!("{by_token};")), "{cookie}");
    assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"));
    let (status, _, _) = f.get("/", Some(&by_token)).await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn after_too_many_wrong_passphrases_even_the_right_one_waits() {
    let f = fixture();
    for _ in 0..MAX_WRONG {
        let (status, _, _) = f
            .post("/login", None, "passphrase=guess+guess+guess", &[])
            .await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
    }
    let form = "passphrase=correct+horse+battery+staple";
    let (status, headers, body) = f.post("/login", None, form, JSON).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    assert!(headers.get("set-cookie").is_none());
    let wait: u64 = headers["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=60).contains(&wait), "{wait}");
    assert!(body.contains("too many wrong passphrases"), "{body}");
}

#[tokio::test]
async fn without_a_passphrase_set_the_login_page_asks_for_the_token() {
    let f = Fixture::with(|_| {});
    let (status, _, page) = f.get("/login", None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(!page.contains("passphrase\""), "{page}");
    let (status, _, _) = f
        .post("/login", None, "passphrase=anything+at+all", &[])
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}
