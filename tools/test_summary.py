#!/usr/bin/env python3
"""Counts the test cases of one `bazel test` invocation from its event file.

Why the build event file and not a glob of bazel-testlogs/**/test.xml: the
testlogs folder keeps XML files of earlier runs (other targets, other
configurations, an old shard count), and the bazel-testlogs symlink belongs to
whichever output base built last.  The build event file (written with
--build_event_json_file) names exactly the test.xml of every test action of
this invocation: each shard, each run, each attempt, fresh or cached.

Counting, per test case in GoogleTest's JUnit XML:
  <failure> or <error> child                          -> failed
  <skipped> child, status="notrun", result="skipped" -> skipped
  otherwise                                           -> passed
The last attempt of each (target, run, shard) counts.  A test action that
bazel reports as failed but whose XML shows no failed case (a crash after the
last test, a sanitizer report at exit, a timeout before any XML) adds one
failed case named after the target; so does a test target that bazel could
not build, and so does a bazel failure (--bazel-exit-code) that no test
explains.  Tests bazel built but did not run (--test_tag_filters) are not
counted.

Prints the failed and skipped cases, then the final line
"N passed, N failed" (", N skipped" when any were skipped).  With --totals
FILE it also writes "passed failed skipped" there.  Exit status: 0 when
nothing failed and at least one case ran, else 1.
"""

import argparse
import json
import os
import sys
import urllib.parse
import xml.etree.ElementTree as ET

PASSING = {"PASSED", "FLAKY"}


def uri_to_path(uri):
    if uri.startswith("file://"):
        return urllib.parse.unquote(uri[len("file://"):])
    return None


def read_events(path, damaged):
    """Yields the JSON events of a --build_event_json_file (one per line).

    A line that is not JSON (bazel cut off mid-write, e.g. by a full disk) is
    skipped and named in `damaged`: the events before it still count, and the
    run is reported as failed rather than crashing the summary."""
    with open(path, encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                yield json.loads(line)
            except json.JSONDecodeError as e:
                damaged.append("line %d: %s" % (number, e))


def count_xml(path):
    """Returns (passed, failed names, skipped names) of one JUnit XML file."""
    root = ET.parse(path).getroot()
    passed, failed, skipped = 0, [], []
    for case in root.iter("testcase"):
        name = ".".join(n for n in (case.get("classname"), case.get("name")) if n)
        children = {child.tag for child in case}
        if "failure" in children or "error" in children:
            failed.append(name)
        elif ("skipped" in children or case.get("status") == "notrun"
              or case.get("result") in ("skipped", "suppressed")):
            skipped.append(name)
        else:
            passed += 1
    return passed, failed, skipped


def summarize(event_file, bazel_exit_code=0):
    # (label, run, shard) -> (attempt, status, xml path)
    results = {}
    summaries = {}  # label -> overall status
    test_targets = set()  # labels of configured test rules
    not_built = set()  # labels whose target did not complete
    damaged = []
    for event in read_events(event_file, damaged):
        ident = event.get("id", {})
        if "testResult" in ident:
            rid = ident["testResult"]
            key = (rid["label"], rid.get("run", 1), rid.get("shard", 1))
            attempt = rid.get("attempt", 1)
            if "testResult" in event:
                body = event["testResult"]
                status = body.get("status", "NO_STATUS")
                xml = None
                for out in body.get("testActionOutput", []):
                    if out.get("name") == "test.xml":
                        xml = uri_to_path(out.get("uri", ""))
            else:  # announced but never run ("aborted")
                status, xml = "NO_STATUS", None
            if key not in results or attempt >= results[key][0]:
                results[key] = (attempt, status, xml)
        elif "testSummary" in ident:
            label = ident["testSummary"]["label"]
            body = event.get("testSummary")
            summaries[label] = body.get("overallStatus", "NO_STATUS") if body else "NO_STATUS"
        elif "targetConfigured" in ident:
            configured = event.get("configured", {})
            if "testSize" in configured or configured.get("targetKind", "").endswith("_test rule"):
                test_targets.add(ident["targetConfigured"]["label"])
        elif "targetCompleted" in ident:
            if not event.get("completed", {}).get("success", False):
                not_built.add(ident["targetCompleted"]["label"])

    sharded = {label for label, _, shard in results if shard > 1}
    passed, failed, skipped = 0, [], []
    for (label, run, shard), (_, status, xml) in sorted(results.items()):
        where = label
        if label in sharded:
            where += " (shard %d)" % shard
        if run > 1:
            where += " (run %d)" % run
        p, f, s = 0, [], []
        if xml and os.path.exists(xml):
            try:
                p, f, s = count_xml(xml)
            except ET.ParseError as e:
                f = ["<unreadable test.xml: %s>" % e]
        passed += p
        failed += ["%s  %s" % (where, name) for name in f]
        skipped += ["%s  %s" % (where, name) for name in s]
        if status not in PASSING and not f:
            failed.append("%s  <%s outside any test case>" % (where, status))
        elif status in PASSING and p + len(f) + len(s) == 0:
            passed += 1  # a passing test binary that wrote no test cases
    ran = {label for label, _, _ in results}
    for label in sorted((test_targets & not_built) - ran):
        failed.append("%s  <FAILED TO BUILD>" % label)
    for label, status in sorted(summaries.items()):
        if label not in ran and label not in not_built and status not in PASSING:
            failed.append("%s  <%s>" % (label, status))
    for where in damaged:
        failed.append("<unreadable build event file, %s>" % where)
    # Exit 3 means failed tests (counted above) and 4 means no tests at all;
    # anything else is bazel itself failing, which must not read as a pass.
    if bazel_exit_code not in (0, 3, 4) and not failed:
        failed.append("<bazel exited with %d before any test failed>" % bazel_exit_code)
    return passed, failed, skipped, len(ran)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("event_file", help="the --build_event_json_file of the run")
    parser.add_argument("--totals", help="also write 'passed failed skipped' to this file")
    parser.add_argument("--bazel-exit-code", type=int, default=0,
                        help="bazel's exit status (a failed build counts as a failure)")
    args = parser.parse_args()

    passed, failed, skipped, targets = summarize(args.event_file, args.bazel_exit_code)
    for name in skipped:
        print("SKIPPED %s" % name)
    for name in failed:
        print("FAILED  %s" % name)
    if passed + len(failed) + len(skipped) == 0:
        print("test_summary: no test case ran", file=sys.stderr)
    print("(%d test targets)" % targets)
    line = "%d passed, %d failed" % (passed, len(failed))
    if skipped:
        line += ", %d skipped" % len(skipped)
    print(line)
    if args.totals:
        with open(args.totals, "w", encoding="utf-8") as f:
            f.write("%d %d %d\n" % (passed, len(failed), len(skipped)))
    return 0 if not failed and passed + len(skipped) > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
