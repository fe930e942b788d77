Feature: Sandbox lifecycle
  A sandbox is created from a spec, described by id, and deleted. The handle a create returns holds
  everything needed to operate the sandbox without asking again: its status, its own capability
  declaration and its working directory. A host finds a sandbox again by its id or its labels; a
  creation spec is honoured or refused field by field, never quietly ignored. Every optional verb
  (pause, archive, fork, snapshots, volumes, SSH access, ...) works when it is declared; scenarios
  about a verb the provider does not declare are skipped, naming the capability.

  @id:create-describe-delete @req:SDP1-050 @req:SKETCH-004 @req:SKETCH-006 @req:REST-001 @req:REST-008 @must
  Scenario: A sandbox can be created, described and deleted
    Given a provider
    When I create a sandbox
    And I describe the sandbox
    Then the description names the same sandbox
    And the description reports a known sandbox state
    When I delete the sandbox
    Then the delete succeeds

  @id:handle-info @req:SDP1-050 @req:SDP1-021 @must
  Scenario: A new sandbox's handle carries everything needed to operate it
    Given a provider
    When I create a sandbox
    Then the handle carries the sandbox's status, with its id and state
    And the handle carries the sandbox's own capability declaration
    And the handle names a non-empty working directory

  # The provider's declaration is the upper bound; a sandbox's own may be narrower, never wider: a host that
  # trusts the sandbox's set would ask it for what the provider said it does not offer.
  @id:handle-capabilities-within-provider @req:SDP1-021 @should
  Scenario: A new sandbox declares nothing its provider does not
    Given a provider
    When I create a sandbox
    Then every capability the handle declares, the provider declared too

  @id:sandbox-id-rules @req:SDP1-038 @must
  Scenario: Sandbox ids are non-empty, at most 256 bytes, with no whitespace or control characters
    Given a provider
    When I create a sandbox
    Then the sandbox id is non-empty, at most 256 bytes, without whitespace or control characters

  @id:describe-after-delete @req:SDP1-S05 @req:SKETCH-012 @req:REST-008 @must
  Scenario: A deleted sandbox is reported gone
    Given a sandbox
    When I delete the sandbox
    And I describe the sandbox
    Then the sandbox is reported not found, or in state deleting or deleted

  # -- finding a sandbox again ---------------------------------------------------------------------

  @id:list-by-labels @req:SDP1-S16 @must
  Scenario: Listing by labels finds exactly the sandboxes that carry every requested label
    Given a provider
    When I create a sandbox labelled with two generated labels
    And I create another sandbox that carries only the first of those labels
    And I list the sandboxes carrying both labels
    Then the list includes the first sandbox
    And the list does not include the other sandbox
    When I list the sandboxes carrying the first label
    Then the list includes both sandboxes
    When I list every sandbox
    Then the list includes the first sandbox

  @id:list-by-label-value @req:SDP1-S16 @must
  Scenario: Listing by a label matches its value, not only its name
    Given a provider
    When I create a sandbox labelled with two generated labels
    And I create another sandbox whose first label has another value
    And I list the sandboxes carrying the first label
    Then the list includes the first sandbox
    And the list does not include the other sandbox

  @id:list-by-empty-label-value @req:SDP1-S16 @req:SDP1-050 @must
  Scenario: A label with an empty value is kept, and listing by it finds only the sandboxes that carry it
    Given a provider
    When I create a sandbox labelled with two generated labels, the second with an empty value
    And I create another sandbox that carries only the first of those labels
    And I list the sandboxes carrying both labels
    Then the list includes the first sandbox
    And the list does not include the other sandbox
    And every answer reports those labels exactly as given

  @id:attach-by-id @req:SDP1-039 @req:SDP1-050 @req:REST-008 @must
  Scenario: Attaching by a stored sandbox id answers a handle to the same sandbox
    Given a sandbox
    When I attach to the sandbox by its id
    Then the attached handle names the same sandbox and working directory

  # Upstream's working_directory_is_effective: `pwd` is judged as the directory it names (pwd -P on both sides), so
  # a working directory reached through a symbolic link is the same directory.
  @id:attach-working-directory-effective @req:SDP1-081 @req:SDP1-050 @req:SDP1-039 @must
  Scenario: A command given no working directory runs in the one the handle names, before and after attaching by id
    Given a sandbox
    When I run `pwd -P` in the sandbox
    And I attach to the sandbox by its id
    And I run `pwd -P` in the sandbox again
    Then both runs printed the working directory the create and the attach named

  @id:runtime-directory-private @req:SDP1-S06 @must
  Scenario: A runtime directory the sandbox names is private: absolute, outside its working directory, mode 0700, the same after attaching
    Given a sandbox
    When I attach to the sandbox by its id
    Then the sandbox's runtime directory is private to it, and the attach named the same one

  # Not SDP1-S17: that rule is about ids the plugin never issued. A deleted id was issued, and the protocol
  # lets a provider keep its tombstone (upstream's host answers a handle in state deleted), as describe may.
  @id:attach-deleted @req:SDP1-S05 @must
  Scenario: Attaching to a sandbox that was deleted is refused as not_found, or shows it deleting or deleted
    Given a sandbox
    When I delete the sandbox and attach to it by its id
    Then the attach is refused as not_found, or answers the sandbox in state deleting or deleted

  @id:start-when-running @req:SDP1-023 @must @dialect:sandbox-driver-v1
  Scenario: Starting a sandbox that is already running changes nothing
    Given a sandbox
    When I start the sandbox
    Then the sandbox is described as running
    When I run `printf still-running`
    Then stdout is exactly "still-running"

  @id:list-after-delete @req:SDP1-S16 @should
  Scenario: A deleted sandbox is no longer listed
    Given a provider
    When I create a sandbox labelled with two generated labels
    And I delete that labelled sandbox
    And I list the sandboxes carrying both labels
    Then the list does not include the first sandbox

  @id:attach-unknown @req:SDP1-S17 @req:REST-008 @must
  Scenario: Attaching to an id the provider never issued is refused as not_found
    Given a provider
    When I attach to a sandbox id that was never issued
    Then the attach is refused as not_found

  @id:unknown-sandbox-call @req:SDP1-S17 @must
  Scenario Outline: A per-sandbox call naming an id the provider never issued is refused as not_found: <call>
    Given a provider
    When I call <call> for a sandbox id that was never issued
    Then that call is refused as not_found

    Examples:
      | call          |
      | platform info |
      | start         |
      | stop          |

  @id:list-by-label-case @req:SDP1-S16 @must
  Scenario Outline: Listing by a label tells letter case apart in its <part>
    Given a provider
    When I create a sandbox labelled with two generated labels
    And I create another sandbox whose first label differs only in the letter case of its <part>
    And I list the sandboxes carrying the first label
    Then the list includes the first sandbox
    And the list does not include the other sandbox

    Examples:
      | part  |
      | value |
      | name  |

  # -- states and the lifecycle verbs ---------------------------------------------------------------

  # v1 has sandbox/stop and sandbox/start as core methods (the gate always applies there); the sketch
  # gates them on lifecycle.stop. Neither protocol states which state a stopped sandbox is described in
  # (the upstream host documents start and stop as no-ops): that is the SHOULD of stop-describes-stopped.
  @id:stop-start-cycle @req:SDP1-040 @req:SKETCH-009 @must @cap:lifecycle.stop
  Scenario: A sandbox that was stopped and started again runs commands, in a protocol state throughout
    Given a sandbox
    When I stop the sandbox
    Then the sandbox is described in one of the protocol's sandbox states
    When I start the sandbox
    Then the sandbox is described in one of the protocol's sandbox states
    When I run `printf started-again`
    Then the command ran and exited with code 0
    And stdout is exactly "started-again"

  # A stop keeps the sandbox (section 9.2), and with it what the create asked for: its variables too.
  @id:stop-start-keeps-env @req:SDP1-051 @req:SDP1-S02 @must @cap:lifecycle.stop
  Scenario: A sandbox's own variables are still there after it was stopped and started again
    Given a sandbox created with the variable CONFORMANCE_LAYER set to "sandbox"
    When I stop the sandbox
    And I start the sandbox
    And I run `printf '%s' "${CONFORMANCE_LAYER-unset}"`
    Then stdout is exactly "sandbox"

  @id:stop-describes-stopped @req:SDP1-S18 @req:SKETCH-010 @should @cap:lifecycle.stop
  Scenario: A stopped sandbox is described stopped, and a started one running
    Given a sandbox
    When I stop the sandbox
    Then the sandbox is described as stopped
    When I start the sandbox
    Then the sandbox is described as running
    And every state reported along the way is one of the protocol's sandbox states

  @id:stop-only-that-sandbox @req:SDP1-023 @req:SKETCH-013 @must @cap:lifecycle.stop
  Scenario: Stopping a sandbox leaves a command running in another sandbox alone
    Given a sandbox
    When another sandbox is running `touch conformance-running; sleep 0.5; printf survived`, which has created conformance-running
    And I stop the sandbox
    Then the command in the other sandbox still ends normally, printing "survived"

  @id:pause-only-that-sandbox @req:SDP1-023 @req:SKETCH-013 @must @cap:lifecycle.pause
  Scenario: Pausing a sandbox leaves a command running in another sandbox alone
    Given a sandbox
    When another sandbox is running `touch conformance-running; sleep 0.5; printf survived`, which has created conformance-running
    And I pause the sandbox
    Then the command in the other sandbox still ends normally, printing "survived"

  @id:pause-resume-continues @req:SDP1-023 @req:SKETCH-013 @must @cap:lifecycle.pause
  Scenario: A command that was running when the sandbox was paused makes no progress until it is resumed, then carries on
    Given a sandbox
    When I start streaming `printf started; for i in $(seq 1 30); do sleep 0.05; printf .; done; printf finished`
    And the streamed command has printed something
    And I pause the sandbox
    Then the streamed command prints nothing more while the sandbox stays paused
    When I resume the sandbox
    Then the streamed command finishes within 15 seconds, printing "finished"

  @id:pause-resume @req:SDP1-023 @req:SKETCH-013 @must @cap:lifecycle.pause
  Scenario: A paused sandbox is described paused, and once resumed it runs commands again
    Given a sandbox
    When I pause the sandbox
    Then the sandbox is described as paused
    When I resume the sandbox
    Then the sandbox is described as running
    When I run `printf resumed`
    Then stdout is exactly "resumed"

  @id:archive-start @req:SDP1-023 @req:SKETCH-013 @must @cap:lifecycle.archive
  Scenario: An archived sandbox keeps its files and runs again once started
    Given a sandbox with a marker file
    When I archive the sandbox
    Then the sandbox is described as archived
    When I start the sandbox
    Then the sandbox is described as running
    And the marker file is still there

  @id:refresh-activity @req:SDP1-023 @req:SDP1-S17 @req:SKETCH-013 @must @cap:lifecycle.refresh_activity
  Scenario: Refreshing a sandbox's activity keeps it running, and needs a sandbox that exists
    Given a sandbox
    When I refresh the sandbox's activity
    Then the sandbox is described as running
    When I refresh the activity of a sandbox id that was never issued
    Then that refresh is refused as not_found

  @id:archive-from-stopped @req:SDP1-023 @req:SKETCH-013 @must @cap:lifecycle.archive @cap:lifecycle.stop
  Scenario: A stopped sandbox can be archived, and runs again once started
    Given a sandbox with a marker file
    When I stop the sandbox
    And I archive the sandbox
    Then the sandbox is described as archived
    When I start the sandbox
    Then the sandbox is described as running
    And the marker file is still there

  @id:set-labels-empty @req:SDP1-023 @req:SKETCH-013 @must @cap:lifecycle.labels
  Scenario: Setting a sandbox's labels to none leaves it with none
    Given a sandbox labelled with a generated label
    When I replace the sandbox's labels with none at all
    Then the sandbox is described with no labels

  @id:set-labels-replace @req:SDP1-023 @req:SKETCH-013 @must @cap:lifecycle.labels
  Scenario: Setting a sandbox's labels replaces all of them
    Given a sandbox labelled with a generated label
    When I replace the sandbox's labels with a new generated label, keeping the run label
    Then the sandbox is described with exactly the new labels
    And listing by the new label finds the sandbox
    And listing by the replaced label does not find it

  @id:set-labels-only-that-sandbox @req:SDP1-023 @req:SKETCH-013 @must @cap:lifecycle.labels @dialect:sandbox-driver-v1 @dialect:sandbox-driver-v2
  Scenario: Setting the labels of a sandbox created without labels leaves another one created without labels alone
    Given a provider
    When I create two sandboxes without any labels
    And I replace the first one's labels with a generated label
    Then the second one is still described without labels

  @id:set-labels-durable @req:SDP1-039 @req:SDP1-023 @must @cap:lifecycle.labels @dialect:sandbox-driver-v1
  Scenario: Labels that were set are the labels a provider process started later sees
    Given a sandbox labelled with a generated label
    When I replace the sandbox's labels with a new generated label, keeping the run label
    And a freshly started provider attaches to the sandbox by its id
    Then the handle it answers carries exactly the new labels

  @id:undelete @req:SDP1-061 @req:SKETCH-013 @must @cap:lifecycle.undelete
  Scenario: Undeleting a deleted sandbox brings it back with its files
    Given a sandbox with a marker file
    When I delete the sandbox
    And I undelete the sandbox
    Then the undelete answers a handle for the same sandbox
    And the sandbox is described as running
    And the marker file is still there
    And the sandbox is described with the labels it had before it was deleted
    And listing by the sandbox's labels finds it again

  # An attach refused while the sandbox was deleted says nothing of the sandbox once it is back.
  @id:undelete-after-refused-attach @req:SDP1-061 @req:SDP1-050 @req:SDP1-S05 @must @cap:lifecycle.undelete
  Scenario: A sandbox that was attached to while deleted can be attached to once undeleted
    Given a sandbox
    When I delete the sandbox and attach to it by its id
    Then the attach is refused as not_found, or answers the sandbox in state deleting or deleted
    When I undelete the sandbox
    And I attach to the sandbox by its id
    Then the attached handle names the same sandbox and working directory

  # handle-capabilities-within-provider asks it of a create's handle; an undelete answers a handle too.
  @id:undelete-handle-capabilities @req:SDP1-021 @should @cap:lifecycle.undelete
  Scenario: An undeleted sandbox's handle carries its own capability declaration, within its provider's
    Given a sandbox
    When I delete the sandbox
    And I undelete the sandbox
    Then the undelete answers a handle for the same sandbox
    And the undeleted handle declares its own capabilities, and none its provider does not

  @id:fork-handle-capabilities @req:SDP1-021 @should @cap:lifecycle.fork
  Scenario: A fork's handle carries its own capability declaration, within its provider's
    Given a sandbox
    When I fork the sandbox with its memory
    Then the fork's handle declares its own capabilities, and none its provider does not

  @id:fork-without-memory @req:SDP1-062 @must
  Scenario: A fork asked to leave memory behind is refused as invalid_spec
    Given a sandbox
    When I fork the sandbox without its memory
    Then the fork is refused as invalid_spec naming include_memory, or as unsupported naming lifecycle.fork when forks are not declared

  @id:resize @req:SDP1-023 @req:SKETCH-013 @must @cap:lifecycle.resize
  Scenario: A resized sandbox reports its new resources and keeps running
    Given a sandbox
    When I resize the sandbox to a different number of CPU cores
    Then the sandbox is described with that number of CPU cores
    And the sandbox is described as running
    And the sandbox still runs commands

  @id:timers-null-default @req:SDP1-054 @must
  Scenario: A creation spec whose lifecycle timers are all left unset gets the provider's defaults
    Given a provider
    When I create a sandbox whose lifecycle timers are all left unset
    Then the sandbox is described as running

  @id:timers-zero-off @req:SDP1-054 @req:SKETCH-013 @must @cap:lifecycle.timers
  Scenario: A lifecycle timer set to zero is switched off, not fired at once
    Given a sandbox
    When I set the sandbox's timers, leaving them all unset
    Then the timers are accepted
    When I switch the sandbox's idle auto-stop timer off with a zero duration
    Then the timers are accepted, or refused as invalid_spec naming the timers
    And the sandbox is still described as running after staying idle for a moment

  @id:update-network @req:SDP1-023 @req:SKETCH-013 @must @cap:lifecycle.update_network
  Scenario: A sandbox's network policy can be changed to a policy the provider declares
    Given a sandbox
    When I change the sandbox's network policy to one the provider declares
    Then the change is accepted
    And the sandbox's status reports the new network policy, if it reports one
    And the sandbox still runs commands

  @id:platform-info @req:SDP1-S08 @must
  Scenario: Platform info names a lowercase operating system and an architecture
    Given a sandbox
    When I ask for the sandbox's platform info
    Then the platform names a non-empty lowercase operating system
    And the platform names an architecture, not a kernel release

  @id:platform-arch-names @req:SDP1-S23 @should
  Scenario: Platform info names the architecture as the target names it
    Given a sandbox
    When I ask for the sandbox's platform info
    Then the platform names its architecture as x86_64, aarch64 and the like, not amd64 or arm64

  @id:checkpoint-retired @req:SDP1-065 @must
  Scenario Outline: The retired checkpoint methods are unknown methods
    Given a freshly started provider that has been initialized
    When the host calls the method "<method>"
    Then the answer is the JSON-RPC error -32601 "method not found"

    Examples:
      | method                     |
      | sandbox/checkpoint         |
      | sandbox/restore_checkpoint |

  @id:list-after-stop @req:SDP1-S18 @should @cap:lifecycle.stop
  Scenario: A stopped sandbox is listed in the state it is described in
    Given a sandbox
    When I stop the sandbox
    Then listing by the sandbox's labels reports it in the state it is described in

  @id:list-after-pause @req:SDP1-S18 @should @cap:lifecycle.pause
  Scenario: A paused sandbox is listed in the state it is described in
    Given a sandbox
    When I pause the sandbox
    Then listing by the sandbox's labels reports it in the state it is described in

  # An archived sandbox still exists: describe answers it and start brings it back, so a host that kept its id
  # must be able to attach to it to do so. not_found is the answer for a sandbox that is not there.
  @id:attach-archived @req:SDP1-039 @req:SDP1-050 @must @cap:lifecycle.archive
  Scenario: An archived sandbox can be attached to by its id
    Given a sandbox
    When I archive the sandbox
    And I attach to the sandbox by its id
    Then the attached handle names the same sandbox and working directory

  # After a set_labels, every answer that carries the sandbox's status carries its labels as they now are.
  @id:attach-after-set-labels @req:SDP1-050 @req:SDP1-023 @must @cap:lifecycle.labels
  Scenario: Attaching after the labels were set reports the new labels
    Given a sandbox labelled with a generated label
    When I replace the sandbox's labels with a new generated label, keeping the run label
    And I attach to the sandbox by its id
    Then the attached handle carries exactly the new labels

  # -- what a creation spec may ask for --------------------------------------------------------------

  @id:creation-spec-field @req:SDP1-051 @req:SDP1-052 @must
  Scenario Outline: A creation-spec field is honoured where it can be seen, or refused as invalid_spec naming it
    Given a provider
    When I create a sandbox asking for <field>
    Then the sandbox honours <field>, or the create is refused as invalid_spec naming <field>

    Examples:
      | field        |
      | sandbox_kind |
      | region       |
      | user         |
      | resources    |

  @id:creation-spec-setting @req:SDP1-051 @must @dialect:sandbox-driver-v1
  Scenario Outline: A setting the provider cannot honour is refused as invalid_spec, never dropped: <setting>
    Given a provider
    When I create a sandbox asking for <setting>
    Then the sandbox visibly has <setting>, or the create is refused as invalid_spec naming <field>

    Examples:
      | setting                 | field             |
      | a GPU                   | resources         |
      | a 1024 MiB disk         | resources         |
      | a one-hour ttl          | timers            |
      | a volume mount          | volumes           |
      | a new working directory | working_directory |
      | an allow-all network    | network           |
      | a blocked network       | network           |
      | deletion once stopped   | ephemeral         |
      | an unknown provider option | provider_config |

  # detail.field names a field of the spec: a second setting it cannot honour does not make it a list.
  @id:creation-spec-two-settings @req:SDP1-051 @req:SDP1-045 @must @dialect:sandbox-driver-v1
  Scenario: A create asking for two settings the provider cannot honour is refused as invalid_spec naming one of them
    Given a provider
    When I create a sandbox asking for an unknown provider option and deletion once stopped
    Then the create is refused as invalid_spec naming provider_config or ephemeral

  @id:creation-spec-empty @req:SDP1-051 @must @dialect:sandbox-driver-v1
  Scenario Outline: A creation-spec field that must not be empty is refused as invalid_spec when it is: <field>
    Given a provider
    When I create a sandbox with an empty <field>
    Then the create is refused as invalid_spec naming <field>

    Examples:
      | field             |
      | region            |
      | working_directory |

  @id:create-with-name @req:SDP1-051 @must
  Scenario: A sandbox created with a name reports that name in every answer that carries its status
    Given a provider
    When I create a sandbox with a generated name
    Then the sandbox's status reports that name

  @id:create-same-name-twice @req:SDP1-050 @must
  Scenario: A second create with a name already in use is refused or answers a new sandbox, never the first one
    Given a provider
    When I create a sandbox with a generated name
    And I create a second sandbox with that same name
    Then the second create is refused, or answers a sandbox of its own

  @id:labels-as-given @req:SDP1-050 @req:SDP1-051 @must
  Scenario: Labels in any script are reported exactly as given, by every answer that carries them
    Given a provider
    When I create a sandbox labelled with labels in several scripts
    Then every answer reports those labels exactly as given

  @id:create-with-long-name @req:SDP1-051 @must
  Scenario: A long name is reported whole, or refused as invalid_spec naming it, never cut short
    Given a provider
    When I create a sandbox with a generated name of 120 characters
    Then the sandbox's status reports that name, unless the create was refused as invalid_spec naming name

  @id:create-with-empty-name @req:SDP1-051 @must
  Scenario: An empty name is reported as the empty string, or refused as invalid_spec naming it, never dropped
    Given a provider
    When I create a sandbox with an empty name
    Then the sandbox's status reports that name, unless the create was refused as invalid_spec naming name

  @id:create-with-spaced-name @req:SDP1-051 @req:SDP1-038 @must
  Scenario: A name with spaces and accented letters is reported as given, and the id stays free of whitespace
    Given a provider
    When I create a sandbox named with spaces and accented letters
    Then the sandbox's status reports that name
    And the sandbox's id is free of whitespace and control characters

  @id:create-from-missing-image @req:SDP1-051 @must @dialect:sandbox-driver-v1
  Scenario: A create from an image that does not exist is refused, never answered with a sandbox made another way
    Given a provider
    When I create a sandbox from an image that does not exist
    Then the create is refused, naming source if it is refused as invalid_spec

  # -- snapshots and volumes -------------------------------------------------------------------------

  @id:snapshot-modes-honest @req:SDP1-064 @req:SKETCH-013 @must @cap:lifecycle.snapshot_sandbox
  Scenario: A snapshot that keeps live processes is taken only by a provider that declares it
    Given a sandbox
    When I snapshot the sandbox including its memory and running processes
    Then the snapshot is taken if live-process snapshots are declared, and otherwise refused as unsupported naming snapshots.live_process_state

  @id:snapshot-filesystem-mode-honest @req:SDP1-064 @req:SDP1-024 @req:SDP1-023 @must @cap:lifecycle.snapshot_sandbox
  Scenario: A snapshot of the filesystem alone is taken only by a provider that declares it
    Given a sandbox
    When I snapshot the sandbox's filesystem alone
    Then the snapshot is taken if filesystem snapshots are declared, and otherwise refused as unsupported naming snapshots.filesystem

  @id:snapshot-list-by-name @req:SDP1-088 @req:SDP1-023 @req:SKETCH-013 @must @cap:snapshots @cap:snapshots.filesystem
  Scenario: Listing snapshots by name finds the snapshot of that name and no other
    Given a sandbox
    When I create two snapshots of the sandbox, the second named like the first with a suffix
    And I list the snapshots by the first one's name
    Then the listing holds the first snapshot and not the second

  # A create from a snapshot is a create: the spec's other settings (labels, variables) are honoured or refused
  # by name, never dropped because the files come from somewhere else.
  @id:snapshot-create-keeps-spec @req:SDP1-051 @must @cap:snapshots @cap:snapshots.filesystem
  Scenario: A sandbox created from a snapshot carries the labels and variables its create asked for, or the create refuses them by name
    Given a sandbox
    When I take a filesystem snapshot of the sandbox
    And I create a sandbox from that snapshot, labelled with a generated label and with the variable CONFORMANCE_LAYER set to "restored"
    Then the sandbox made from the snapshot is described with that label
    And in the sandbox made from the snapshot CONFORMANCE_LAYER is "restored"

  @id:snapshot-unknown-not-found @req:SDP1-045 @req:SKETCH-013 @must @cap:snapshots
  Scenario: Asking for a snapshot that does not exist is refused as not_found naming the snapshot
    Given a provider
    When I ask for a snapshot id that was never issued
    Then that request is refused as not_found naming the resource snapshot and that id

  @id:snapshot-delete-idempotent @req:SDP1-089 @req:SDP1-040 @req:SKETCH-013 @must @cap:snapshots @cap:snapshots.filesystem
  Scenario: A snapshot is described with a known state, and deleting it succeeds however often it is asked
    Given a sandbox
    When I create a snapshot of the sandbox
    Then the snapshot is described with a known snapshot state
    When I delete the snapshot twice at the same time
    And I delete the snapshot once more
    Then every snapshot delete succeeds
    And the snapshot is reported gone

  @id:snapshot-inherits @req:SDP1-090 @must @cap:snapshots @cap:snapshots.filesystem @dialect:sandbox-driver-v1 @dialect:sandbox-driver-v2
  Scenario Outline: A snapshot of a sandbox that asks for a different <field> is refused as invalid_spec
    Given a sandbox created through a freshly started provider
    When I create a snapshot of the sandbox asking for a different <field>
    Then the snapshot request is refused as invalid_spec naming <field>

    Examples:
      | field        |
      | sandbox_kind |
      | resources    |

  # Region is an optional field of a snapshot's spec (v1 section 8.6). Like any setting of a spec, it is honoured
  # (the snapshot lists the region among its regions) or refused as invalid_spec naming it, never dropped.
  @id:snapshot-region-honoured-or-refused @req:SDP1-051 @must @cap:snapshots @cap:snapshots.filesystem
  Scenario: A snapshot asked for in a region is made there, or refused as invalid_spec naming region
    Given a sandbox
    When I create a snapshot of the sandbox asking for a generated region
    Then the snapshot lists that region among its regions, unless the request was refused as invalid_spec naming region

  @id:snapshot-spaced-name @req:SDP1-038 @must @cap:snapshots @cap:snapshots.filesystem
  Scenario: A snapshot named with spaces and accented letters gets an id free of whitespace
    Given a sandbox
    When I create a snapshot of the sandbox named with spaces and accented letters
    Then the snapshot's id is free of whitespace and control characters, unless the name was refused as invalid_spec naming name

  @id:snapshot-activation-gated @req:SDP1-029 @req:SKETCH-013 @must @cap:snapshots @cap:snapshots.filesystem
  Scenario: Deactivating a snapshot needs snapshots.activation
    Given a sandbox
    When I create a snapshot of the sandbox
    And I deactivate the snapshot
    Then the deactivation is served if snapshot activation is declared, and otherwise refused as unsupported naming snapshots.activation

  @id:snapshot-activation @req:SDP1-029 @req:SKETCH-013 @must @cap:snapshots.activation @cap:snapshots.filesystem
  Scenario: A deactivated snapshot is described inactive, and an activated one active
    Given a sandbox
    When I create a snapshot of the sandbox
    And I deactivate the snapshot
    Then the snapshot is described as inactive
    When I activate the snapshot
    Then the snapshot is described as active

  @id:snapshot-volume-services @req:SDP1-088 @must
  Scenario Outline: The <service> service exists exactly when its capability is declared
    Given a provider
    When I list the provider's <service>
    Then the listing is served if <service> is declared, and otherwise refused as unsupported naming <service>

    Examples:
      | service   |
      | snapshots |
      | volumes   |

  @id:volume-lifecycle @req:SDP1-089 @req:SDP1-040 @req:SKETCH-013 @must @cap:volumes
  Scenario: A volume is described with a known state, listed, and deleted idempotently
    Given a provider
    When I create a volume
    Then the volume is described with a known volume state
    And listing volumes includes it
    When I delete the volume
    And I delete the volume again
    Then both volume deletes succeed
    And the volume is reported gone

  # Upstream's volume_round_trip: a volume create refused for the credential (auth, or a provider error coded 401 or
  # 403) is a skip, "the credential lacks volume permissions", never a failure.
  @id:volume-persists-across-sandboxes @req:SDP1-023 @must @cap:volumes @cap:volumes.create_time_attach
  Scenario: Bytes written to a mounted volume outlive the sandbox, and a new sandbox mounting the volume reads them back
    Given a provider
    When I create a volume, unless the credential lacks volume permissions
    And I write the bytes 0 1 2 255 254 10 13 0 to a file on the volume, mounted in a new sandbox
    And I delete that sandbox and wait until it is gone
    And I create another sandbox mounting the same volume
    Then the other sandbox reads exactly those bytes from the file on the volume

  # -- access --------------------------------------------------------------------------------------

  @id:ssh-access @req:SDP1-091 @req:SKETCH-013 @must @cap:access.ssh
  Scenario: SSH access is a command that runs as it is, and a lifetime is honoured or refused by name
    Given a sandbox
    When I ask for SSH access to the sandbox
    Then the access is a single command line with no placeholders left to fill in
    When I ask for SSH access to the sandbox for 60 seconds
    Then the access expires within 60 seconds if SSH lifetimes are declared, and otherwise is refused as unsupported naming access.ssh.ttl

  @id:ssh-revoke @req:SDP1-092 @req:SKETCH-013 @must @cap:access.ssh @cap:access.ssh.revoke
  Scenario: SSH access comes with a token that can be revoked
    Given a sandbox
    When I ask for SSH access to the sandbox
    Then the access carries a token
    When I revoke that token
    Then the revocation succeeds
