Feature: GAP 2 — resource sizing is honoured or refused, never silently dropped
  A sandbox asked for a memory or CPU size either gets that size, enforced where the command can feel
  it, or the create is refused as invalid_spec naming resources. Accepting the size and running
  without it is the one wrong answer: a 512 MiB guest that silently OOM-killed test suites is how
  forkd found this gap. (The fabro sketch has no sizing knob at all: not expressible there.)

  @id:resources-memory @req:GAP-2 @req:SDP1-051 @must
  Scenario: A memory limit is enforced inside the sandbox, or refused
    When I create a sandbox asking for 128 MiB of memory
    Then the limit is enforced inside the sandbox, or the create was refused as invalid_spec naming resources

  @id:resources-cpu @req:GAP-2 @req:SDP1-051 @must
  Scenario: A CPU allowance is enforced inside the sandbox, or refused
    When I create a sandbox asking for 1 CPU core
    Then the CPU allowance is enforced inside the sandbox, or the create was refused as invalid_spec naming resources
