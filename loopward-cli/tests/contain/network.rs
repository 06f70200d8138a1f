//! Network by allow-list: an agent's hosts through the proxy, the opt-out recorded, bad hosts
//! refused at load.

use super::*;

#[test]
fn a_command_reaches_only_its_agents_hosts_through_the_proxy_and_report_counts_each_decision() {
    let (good, _) = http_server("127.0.0.1", "hello-from-allowed");
    let (evil, evil_hits) = http_server("127.0.0.2", "attacker-got-it");
    let dir = project(&format!(
        "[[agents.builder]]\ntool_calls = [{{ name = \"shell\", arguments = {{ command = \"curl -s -m 5 http://127.0.0.1:{good}/; echo; curl -s -m 5 http://127.0.0.2:{evil}/; curl -s -m 5 --noproxy '*' http://127.0.0.2:{evil}/ || echo direct-failed\" }} }}]\n\n\
         [[agents.builder]]\ntext = \"done\"\n"
    ));
    let d = dir.path();
    with_net(d, "[\"127.0.0.1\"]", "");
    let stdout = run_json(d);
    assert!(stdout.contains("hello-from-allowed"), "{stdout}");
    crate::support::assert_says(
        &stdout,
        "loopward egress: 127.0.0.2 is not in this agent's net allow-list",
    );
    assert!(stdout.contains("direct-failed"), "{stdout}");
    assert!(!stdout.contains("attacker-got-it"), "{stdout}");
    assert_eq!(evil_hits.load(std::sync::atomic::Ordering::SeqCst), 0);
    let report = loopward(d, &["report"], &[]);
    let out = text(&report);
    crate::support::assert_says(&out, "egress: 1 connections allowed, 1 refused");
    // The run's page shows each decision and the counts.
    let page = std::fs::read_to_string(d.join("runs/r1/audit.html")).unwrap();
    crate::support::assert_says(&page, &format!("egress to 127.0.0.2:{evil} refused"));
    crate::support::assert_says(&page, &format!("egress to 127.0.0.1:{good} allowed"));
    assert!(page.contains("egress (allowed / refused)"), "{page}");
}

#[test]
fn opting_out_of_network_isolation_is_recorded_on_every_call() {
    let dir = project(
        "[[agents.builder]]\ntool_calls = [{ name = \"shell\", arguments = { command = \"true\" } }]\n\n\
         [[agents.builder]]\ntext = \"done\"\n",
    );
    with_net(dir.path(), "[]", "[net]\nisolate = false\n");
    let stdout = run_json(dir.path());
    crate::support::assert_says(&stdout, "network: this command reaches any host");
}

#[test]
fn a_host_in_net_that_is_not_one_is_refused_at_load() {
    let dir = project("[[agents.builder]]\ntext = \"done\"\n");
    with_net(dir.path(), "[\"https://evil.example/x\"]", "");
    assert_refused_at_load(
        dir.path(),
        &["agent[0].net[0]", "is not a host name or an address"],
    );
}
