Feature: Streaming a command's output
  A streamed command sends its output as it happens, chunk by chunk, tagged stdout or stderr, and
  answers only once every chunk has been sent. The answer says honestly what the stream was: live or
  replayed, separated or combined. Whatever the retained copy keeps, every byte is streamed and
  counted; nothing is dropped, and one command's output never holds up another's.

  Background:
    Given a sandbox

  @id:stream-output-before-response @req:SDP1-100 @req:SKETCH-013 @must
  Scenario: Every output chunk arrives before the response, in the order it was written
    When I stream `for i in 1 2 3 4 5; do echo "line $i"; sleep 0.05; done`
    Then every output chunk arrived before the response
    And the streamed stdout is exactly "line 1\nline 2\nline 3\nline 4\nline 5\n"

  @id:stream-stderr-tagged @req:SDP1-101 @req:SDP1-103 @req:SKETCH-013 @must
  Scenario: stderr is streamed tagged stderr when the streams are separated, and as stdout when they are not
    When I stream `printf 'to stdout'; printf 'to stderr' >&2`
    Then every output chunk is tagged stdout or stderr
    And the chunks keep stdout and stderr apart exactly as far as the result says the streams are separated

  # A replayed buffer would arrive all at once, right before the response.
  @id:stream-live-streaming-honest @req:SDP1-102 @req:SKETCH-013 @must
  Scenario: A result claims live streaming only when output arrived while the command was still running
    When I stream `echo first; sleep 2; echo second`
    Then if the result claims live streaming, the first chunk arrived at least 1 second before the response
    And the streamed stdout is exactly "first\nsecond\n"

  @id:stream-claims-declared @req:SDP1-104 @req:SKETCH-013 @must
  Scenario: A streaming result claims no property the provider did not declare at initialize
    When I stream `printf 'to stdout'; printf 'to stderr' >&2`
    Then the result claims live streaming only if the provider declared exec.live_streaming
    And the result claims separated streams only if the provider declared exec.streams_separated

  @id:stream-interleaved-order @req:SDP1-100 @req:SDP1-102 @req:SKETCH-013 @must
  Scenario: A live, separated stream delivers stdout and stderr in the order they were written
    When I stream `printf 'out-1 '; sleep 0.3; printf 'err-1 ' >&2; sleep 0.3; printf 'out-2 '; sleep 0.3; printf 'err-2 ' >&2`
    Then if the stream says it is live and separated, its chunks came in the order written: out-1, err-1, out-2, err-2

  @id:stream-retention @req:SDP1-105 @req:SDP1-106 @req:SDP1-107 @req:SKETCH-013 @must
  Scenario Outline: A retained output limit caps only the copy in the result, never the stream (<stream>)
    When I stream a command that writes the numbers 1 to 2000 to <stream>, retaining at most 1000 bytes
    Then the chunks carry every byte written to <stream>, in order
    And the <stream> capture counts every byte as observed, 1000 retained, the rest omitted, nothing truncated
    And the result keeps the first 500 and the last 500 bytes written to <stream>

    Examples:
      | stream |
      | stdout |
      | stderr |

  @id:stream-retention-both @req:SDP1-105 @req:SDP1-106 @req:SKETCH-013 @must
  Scenario: Each output stream has a retained output limit of its own
    When I stream a command that writes the numbers 1 to 2000 on both of its outputs, retaining at most 1000 bytes each
    Then the stdout capture counts every byte as observed, 1000 retained, the rest omitted, nothing truncated
    And the stderr capture counts every byte as observed, 1000 retained, the rest omitted, nothing truncated
    And the result keeps the first 500 and the last 500 bytes written to stderr

  # The stable head is limit/2 bytes in whole bytes (499 of 999), the rolling tail the rest (500).
  @id:stream-retention-odd @req:SDP1-105 @req:SDP1-106 @req:SKETCH-013 @must
  Scenario: An odd retained output limit is counted and split as exactly as an even one
    When I stream a command that writes the numbers 1 to 2000 to stdout, retaining at most 999 bytes
    Then the chunks carry every byte written to stdout, in order
    And the stdout capture counts every byte as observed, 999 retained, the rest omitted, nothing truncated
    And the result keeps the first 499 and the last 500 bytes written to stdout

  # seq 1 200 writes 692 bytes: more than half the limit, less than all of it, so the rolling tail has begun and
  # not yet wrapped. Everything is kept, and counted as it is.
  @id:stream-retention-under-limit @req:SDP1-105 @req:SDP1-106 @req:SKETCH-013 @must
  Scenario: Output that fills more than half the retained output limit, but not all of it, is kept whole
    When I stream a command that writes the numbers 1 to 200 to stdout, retaining at most 1000 bytes
    Then the stdout capture counts every byte as observed, 692 retained, the rest omitted, nothing truncated
    And the result keeps the first 500 and the last 192 bytes written to stdout

  @id:stream-retention-zero @req:SDP1-105 @req:SDP1-106 @req:SKETCH-013 @must
  Scenario: A retained output limit of 0 keeps nothing in the result and still streams everything
    When I stream a command that writes the numbers 1 to 2000 to stdout, retaining at most 0 bytes
    Then the chunks carry every byte written to stdout, in order
    And the stdout capture counts every byte as observed, 0 retained, the rest omitted, nothing truncated
    And the result keeps nothing of stdout

  @id:stream-concurrent @req:SDP1-109 @req:SKETCH-013 @must
  Scenario: A slow stream does not hold up another command or another request
    When I stream a slow command that prints a line every 50 ms for 1.5 seconds
    And while it runs I stream a fast command and describe the sandbox
    Then the fast command and the describe both finished at least half a second before the slow command
    And the fast command's chunks carry exactly its own output
    And the slow command's chunks carry all of its lines, in order

  # The command ends by itself after 10 seconds, so a provider that ignores a streamed command's timeout fails quickly.
  @id:stream-timeout @req:SDP1-074 @req:SDP1-068 @req:SKETCH-013 @must
  Scenario: A streamed command that outlives its timeout is a normal result that says it timed out
    When I stream `printf started; sleep 10; printf finished` with a timeout of 1 second
    Then the result says the command timed out, at most 4 seconds after the timeout
    And the streamed stdout is exactly "started"

  # exec-foreign-signal asks it of a buffered command; the signal field is the same field of a streamed result.
  @id:stream-foreign-signal @req:SDP1-072 @req:SDP1-068 @req:SKETCH-013 @must
  Scenario: A streamed command ended by a signal reports that signal's number, as a buffered one does
    When I stream `kill -TERM $$; sleep 5`
    Then the command was ended by signal 15

  @id:stream-same-interpreter @req:SDP1-068 @req:SKETCH-013 @must
  Scenario: Buffered and streamed commands run under the same interpreter with the same options
    When I run `printf '%s|%s|%s|%s' "${BASH_VERSION:-not bash}" "$-" "${SHELLOPTS:-none}" "$(shopt login_shell)"` both buffered and streamed
    Then both runs printed the same, and it names a Bash version

  # The escape sequence is split across two writes, so it reaches the provider in two chunks.
  @id:stream-sanitized @req:SDP1-070 @req:SKETCH-013 @must
  Scenario: Sanitization applies to streamed chunks across chunk boundaries, before the bytes are counted
    When I stream `printf '\033'; sleep 1; printf '[31mred\033[0m\n'` with output sanitization strip_all
    Then the streamed stdout is exactly "red\n"
    And stdout is exactly "red\n"
    And the stdout capture observed 4 bytes

  @id:stream-relative-working-dir @req:SDP1-081 @req:SDP1-068 @must
  Scenario: A streamed command's relative working directory is taken relative to the sandbox's working directory
    When there is a directory "conformance-relative-wd" in the sandbox
    And I stream `pwd` in that directory, given by its path relative to the sandbox's working directory
    Then stdout is that directory's absolute path, followed by a newline

  @id:stream-stdin @req:SDP1-075 @req:SKETCH-013 @cap:exec.stdin @must
  Scenario: The bytes given as stdin reach a streamed command too, followed by end of file
    When I stream `od -An -v -tx1 | tr -d ' \n'` with every byte value from 0 to 255 as its stdin
    Then the streamed stdout is every byte value from 0 to 255, in order, as hex

  @id:stream-cancel @req:SDP1-074 @cap:exec.cancel @req:SKETCH-013 @must
  Scenario: A cancelled stream ends soon, as a normal result that says it was cancelled
    When I start streaming `printf started; sleep 10; printf finished`
    And I cancel it once it has started
    Then the stream answered a normal result with termination cancelled, at most 5 seconds after the cancel

  # The command prints nothing before the cancel: an exec is cancellable from its start, not from its first output.
  @id:stream-cancel-before-output @req:SDP1-074 @req:SDP1-023 @cap:exec.cancel @req:SKETCH-013 @must
  Scenario: A stream cancelled before it has printed anything ends soon too, as cancelled
    When I start streaming `touch conformance-running; sleep 10; printf finished`
    And I cancel it once it has created conformance-running, before it has printed anything
    Then the stream answered a normal result with termination cancelled, at most 5 seconds after the cancel

  @id:stream-cancel-only-that-one @req:SDP1-110 @req:SDP1-074 @cap:exec.cancel @req:SKETCH-013 @must
  Scenario: Cancelling one stream leaves another stream in the same sandbox running
    When I start streaming `printf started; sleep 10; printf finished`
    And another stream `printf other-; sleep 1.5; printf done` runs beside it in the same sandbox
    And I cancel it once it has started
    Then the other stream still ends normally, having streamed "other-done"

  @id:stream-cancel-term-first @req:SDP1-074 @cap:exec.cancel @req:SKETCH-013 @should
  Scenario: A cancelled command is asked to stop before it is killed, so its TERM handler runs
    When I start streaming `trap 'printf trapped; exit 0' TERM; printf started; sleep 10 & wait`
    And I cancel it once it has started
    Then the stream answered a normal result with termination cancelled, at most 5 seconds after the cancel
    And the stream carried "trapped"

  @id:stream-binary-output @req:SDP1-035 @req:SDP1-100 @req:SKETCH-013 @must
  Scenario: A stream carries every byte value as written, bytes that are not text included
    When I stream a command that writes every byte value from 0 to 255
    Then the streamed stdout is exactly every byte value from 0 to 255

  @id:stream-cancel-idle @req:SDP1-110 @cap:exec.cancel @req:SKETCH-013 @must
  Scenario Outline: Cancelling an exec id that is <exec> succeeds and changes nothing
    When I start streaming `printf 'running, '; sleep 0.5; printf 'still here'`
    And while it runs I cancel an exec id that is <exec>
    Then the exec cancel succeeds
    And the running stream still ends normally, having streamed "running, still here"

    Examples:
      | exec                          |
      | unknown                       |
      | finished                      |
      | a prefix of the running one's |
