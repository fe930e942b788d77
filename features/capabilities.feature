Feature: Capability honesty
  Every optional operation is gated by a capability. A provider that declares a capability must
  serve it; a provider that does not must refuse the operation with the error kind "unsupported",
  naming the capability, so a host can tell "not offered" from "broken". A sandbox's own declaration
  is authoritative for operations on that sandbox.

  # The tables list the optional operations of every dialect; a row the provider's dialect has no way
  # to ask for is skipped as not expressible (the sketch's rows under sandbox-driver-v1, and back).
  # Each Examples block carries the requirements of its own rows (a row cites the scenario's and its block's).
  @id:optional-operation @req:SDP1-023 @req:SDP1-024 @req:SKETCH-002 @must
  Scenario Outline: An optional operation is served when declared and refused as unsupported when not
    Given a sandbox
    When I ask the provider to <operation>
    Then the answer matches whether <capability> is declared for the sandbox

    @req:SDP1-060
    Examples: Lifecycle operations
      | operation                | capability                 |
      | pause                    | lifecycle.pause            |
      | resume                   | lifecycle.pause            |
      | archive                  | lifecycle.archive          |
      | recover                  | lifecycle.recover          |
      | refresh activity         | lifecycle.refresh_activity |
      | undelete                 | lifecycle.undelete         |
      | fork                     | lifecycle.fork             |
      | resize                   | lifecycle.resize           |
      | snapshot                 | lifecycle.snapshot_sandbox |
      | set timers               | lifecycle.timers           |
      | set labels               | lifecycle.labels           |
      | update network           | lifecycle.update_network   |

    Examples: Exec, terminals, logs and permissions
      | operation                | capability                 |
      | run with stdin           | exec.stdin                 |
      | open a stdio process     | exec.stdio_process         |
      | open a terminal          | pty                        |
      | follow logs              | logs                       |
      | set permissions          | fs.permissions             |

    @req:SDP1-028
    Examples: Snapshots and volumes
      | operation                | capability                 |
      | create a snapshot        | snapshots                  |
      | list snapshots           | snapshots                  |
      | get a snapshot           | snapshots                  |
      | delete a snapshot        | snapshots                  |
      | activate a snapshot      | snapshots.activation       |
      | deactivate a snapshot    | snapshots.activation       |
      | create a volume          | volumes                    |
      | list volumes             | volumes                    |
      | get a volume             | volumes                    |
      | delete a volume          | volumes                    |

    @req:SDP1-030
    Examples: Access
      | operation                | capability                 |
      | get a preview url        | access.preview_urls        |
      | get a signed preview url | access.preview_urls.signed |
      | create ssh access        | access.ssh                 |
      | revoke ssh access        | access.ssh.revoke          |
      | open a web terminal      | access.web_terminal        |
      | open a vnc connection    | access.vnc                 |

    Examples: The sketch's operations
      | operation                | capability                 |
      | stream a command's output | exec.streaming            |
      | cancel a command         | exec.cancel                |
      | read a file natively     | fs.native                  |
      | write a file natively    | fs.native                  |
      | list a directory natively | fs.native                 |
      | grep files               | grep                       |
      | glob for files           | glob                       |
      | stop the sandbox         | lifecycle.stop             |
      | set auto-stop            | lifecycle.autoStop         |
