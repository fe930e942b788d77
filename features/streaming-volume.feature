Feature: Streaming a large output
  However much a command writes, every byte reaches the host, in order: the provider stalls the
  command rather than dropping output or buffering without bound. (Kept apart from
  streaming.feature because it moves 64 MiB and takes several seconds.)

  Background:
    Given a sandbox

  # About 9 million lines; the retained copy is off so the response itself stays small.
  @id:stream-large-output @req:SDP1-108 @req:SKETCH-013 @must
  Scenario: 64 MiB of output arrives complete and in order
    When I stream a command that writes at least 64 MiB of numbered lines to stdout, retaining at most 0 bytes
    Then the chunks carry every byte written to stdout, in order
    And the stdout capture counts every byte as observed, 0 retained, the rest omitted, nothing truncated
