@dialect:sandbox-driver-v2
Feature: Version 2 optional services: environment, preview URLs, build logs, git clones and one-shot containers
  What version 2 added beside commands, each served only where the provider declares it. A sandbox's
  environment is the one a command there starts with, its own variables included. A preview URL is one the
  host's machine can open to reach a port a process in the sandbox listens on; releasing one that was never
  asked for, or twice, is a success. A snapshot's build log comes as stdout frames on its channel. A native
  git clone lands where it was asked, complete when answered, pinned exactly where it was pinned, and keeps no
  credentials. A one-shot container runs in the sandbox's workspace and network.

  @id:v2-sandbox-environment @req:SDP2-S43 @must @cap:exec.environment
  Scenario: The environment the provider reports is the one a command in the sandbox starts with, the sandbox's own variables included
    Given a sandbox created with the variable CONFORMANCE_SANDBOX_OWN set to "the sandbox's own value"
    When I ask for the sandbox's environment
    And I run the program env in the sandbox, giving it no variables of its own
    Then the environment names CONFORMANCE_SANDBOX_OWN as "the sandbox's own value"
    And every variable it names reaches that command with the same value

  @id:v2-preview-release @req:SDP2-138 @must @cap:access.preview_urls
  Scenario: Releasing a preview port never asked for, or released already, succeeds
    Given a sandbox
    When I release preview port 8123 of the sandbox, which was never asked for
    Then the release succeeded
    When I ask for a preview url of port 8124 and release it twice
    Then both releases succeeded

  @id:v2-preview-reaches-port @req:SDP2-S39 @must @cap:access.preview_urls
  Scenario: A preview URL, opened from the host's machine, reaches the port a process in the sandbox listens on
    Given a sandbox
    And a process in the sandbox serving a generated page over HTTP
    When I ask for a preview url of that process's port
    Then opening the url from the host's machine gets that page

  @id:v2-snapshot-build-logs @req:SDP2-S38 @must @cap:snapshots.build_logs @cap:snapshots.filesystem
  Scenario: A snapshot's build log arrives as stdout frames on its channel, then its end of file, then the answer
    Given a sandbox
    And a snapshot of the sandbox's filesystem
    When I follow the snapshot's build log to its end
    Then the follow succeeded, its channel carrying stdout frames only, then one empty end of file before the answer

  # The repository is a directory of the sandbox, so no network is needed.
  @id:v2-git-clone @req:SDP2-S37 @must @cap:git.native
  Scenario: A clone into a relative target lands under the working directory, complete when it is answered
    Given a sandbox
    And a git repository "origin" in the sandbox with two commits, the older one tagged "conformance-first"
    When I clone "origin" into "clones/plain" through the provider
    Then the clone succeeded, and "clones/plain" in the working directory is at the newer commit

  @id:v2-git-clone-pinned @req:SDP2-137 @must @cap:git.native
  Scenario Outline: A clone pinned to <pin> checks out that commit, not the branch head
    Given a sandbox
    And a git repository "origin" in the sandbox with two commits, the older one tagged "conformance-first"
    When I clone "origin" into "clones/pinned" pinned to <pin>
    Then the clone succeeded, and "clones/pinned" in the working directory is at the older commit

    Examples:
      | pin                           |
      | the older commit              |
      | the tag "conformance-first"   |

  @id:v2-git-clone-missing-pin @req:SDP2-137 @must @cap:git.native
  Scenario: A clone pinned to a commit the repository does not have fails, and never falls back to the branch head
    Given a sandbox
    And a git repository "origin" in the sandbox with two commits, the older one tagged "conformance-first"
    When I clone "origin" into "clones/missing" pinned to a commit it does not have
    Then the clone failed, and "clones/missing" holds no checkout of the branch head

  @id:v2-git-clone-credentials @req:SDP2-137 @must @cap:git.native
  Scenario: Credentials given for a clone are never written into the repository
    Given a sandbox
    And a git repository "origin" in the sandbox with two commits, the older one tagged "conformance-first"
    When I clone "origin" into "clones/credentialed" with a generated username and password
    Then nothing under "clones/credentialed/.git" holds the password

  # The one-shot runs busybox from its registry.
  @id:v2-one-shot-workspace @req:SDP2-144 @must @cap:one_shot
  Scenario: A one-shot container works in the sandbox's workspace, at its working directory
    Given a sandbox
    And a file "one-shot-input.txt" holding generated text
    When I run a one-shot container that copies "one-shot-input.txt" to "one-shot-output.txt"
    Then "one-shot-output.txt" in the sandbox holds the text of "one-shot-input.txt"

  @id:v2-one-shot-network @req:SDP2-144 @must @cap:one_shot
  Scenario: A one-shot container shares the sandbox's network: it reaches a server the sandbox runs on 127.0.0.1
    Given a sandbox
    And a process in the sandbox serving a generated page over HTTP
    When I run a one-shot container that fetches that page from 127.0.0.1 into "one-shot-page.html"
    Then "one-shot-page.html" in the sandbox holds that page
