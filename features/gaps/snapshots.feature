Feature: GAP 1 — snapshots and copy-on-write branches
  A provider that offers snapshots or forks keeps them faithful: a branch starts with the files of
  the snapshot it came from, and from then on the branch and its source never see each other's
  writes; a fork also keeps the processes that were running. A provider that does not offer them
  says so with "unsupported". Starting a sandbox from a snapshot that does not exist is refused,
  never quietly replaced by some other starting point. (forkd's microVM snapshots branch by
  copy-on-write; the fabro sketch can only name a snapshot tag, so branching is not expressible there.)

  @id:snapshot-filesystem @req:GAP-1 @req:SDP1-053 @req:SDP1-064 @must
  Scenario: A branch from a filesystem snapshot starts with the snapshot's files, hidden files and links as they were, and keeps its own state
    Given a sandbox with a marker file
    And the sandbox holds a hidden file and a symbolic link to it
    When I branch the sandbox through a filesystem snapshot
    Then the branch starts with the snapshot's files, and later writes on either side stay on that side, unless snapshots are not declared and were refused as unsupported
    And the branch keeps the hidden file, and the link as a symbolic link to it, unless the snapshot was refused

  @id:fork-copy @req:GAP-1 @req:SDP1-063 @must
  Scenario: A fork keeps its source's files and running processes, and its own state from then on
    Given a sandbox with a marker file
    When I fork the sandbox while a process runs in it
    Then the fork has the source's files and its running process, and keeps its own state, unless forks are not declared and were refused as unsupported

  @id:snapshot-missing-refused @req:GAP-1 @req:SDP1-053 @req:SKETCH-004 @must
  Scenario: A sandbox cannot be started from a snapshot that does not exist
    Given a provider
    When I create a sandbox from a snapshot that does not exist
    Then the create is refused with an error, not started from something else

  @id:snapshot-missing-refused-as-missing @req:GAP-1 @req:SDP1-053 @must
  Scenario: A create from a snapshot that does not exist is refused as missing, naming the snapshot
    Given a provider
    When I create a sandbox from a snapshot that does not exist
    Then the refusal says the snapshot is missing: not found or invalid spec, naming it
