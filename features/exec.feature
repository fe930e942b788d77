Feature: Running commands
  A command is Bash source. Whatever it does, the provider reports what happened: its exit code,
  what it wrote to stdout and to stderr, byte for byte. A command that fails is a result, not an
  error of the provider.

  Background:
    Given a sandbox

  @id:exec-exit-code @req:SDP1-S01 @req:SDP1-073 @req:SKETCH-005 @req:REST-002 @must
  Scenario Outline: The command's exit code is reported
    When I run `exit <code>`
    Then the command ran and exited with code <code>

    Examples:
      | code |
      | 0    |
      | 1    |
      | 42   |
      | 200  |
      | 255  |

  @id:exec-separate-streams @req:SDP1-S04 @req:SKETCH-005 @req:REST-002 @must
  Scenario: stdout and stderr are reported separately
    When I run `printf 'to stdout'; printf 'to stderr' >&2`
    Then stdout is exactly "to stdout"
    And stderr is exactly "to stderr"

  @id:exec-env @req:SDP1-S02 @req:SKETCH-005 @req:REST-002 @must
  Scenario: Variables given with the command reach it
    When I run `printf '%s' "$CONFORMANCE_GREETING"` with the variable CONFORMANCE_GREETING set to a generated value
    Then stdout is exactly that generated value

  @id:exec-env-empty @req:SDP1-S02 @req:SKETCH-005 @req:REST-002 @must
  Scenario: A variable given with an empty value reaches the command set, and empty
    When I run `test "${CONFORMANCE_EMPTY+set}" = set && printf 'set:(%s)' "$CONFORMANCE_EMPTY"` with the variable CONFORMANCE_EMPTY set to an empty value
    Then stdout is exactly "set:()"

  @id:exec-env-value-verbatim @req:SDP1-S02 @req:SKETCH-005 @req:REST-002 @must
  Scenario: A variable's value reaches the command byte for byte, whatever shell syntax it holds
    When I run `printf '%s' "$CONFORMANCE_VERBATIM"` with the variable CONFORMANCE_VERBATIM set to a value full of shell syntax
    Then stdout is exactly that generated value

  @id:exec-env-over-sandbox-env @req:SDP1-S02 @must
  Scenario: A variable given with the command wins over the sandbox's own value of it
    Given a sandbox created with the variable CONFORMANCE_LAYER set to "sandbox"
    When I run `printf '%s' "$CONFORMANCE_LAYER"` with the variable CONFORMANCE_LAYER set to "command"
    Then stdout is exactly "command"

  @id:sandbox-env-isolated @req:SDP1-051 @req:SDP1-S02 @must
  Scenario: A sandbox's own variables are its own: a sandbox created without them does not see them
    Given a sandbox created with the variable CONFORMANCE_LAYER set to "first-sandbox"
    When I create another sandbox without variables
    Then in that other sandbox CONFORMANCE_LAYER is unset, and in the first it is "first-sandbox"

  @id:exec-large-output @req:SDP1-068 @req:SKETCH-005 @req:REST-002 @must
  Scenario: A buffered command's output comes back whole, however large, on both streams
    When I run `head -c 300000 /dev/zero | tr '\0' o; head -c 200000 /dev/zero | tr '\0' e >&2`
    Then stdout is 300000 bytes of the letter o and stderr 200000 bytes of the letter e

  @id:exec-env-names-as-given @req:SDP1-S02 @req:SKETCH-005 @req:REST-002 @must
  Scenario Outline: A variable reaches the command under exactly its own name: <name>
    When I run `printf '%s' "$<name>"` with the variable <name> set to "as-given"
    Then stdout is exactly "as-given"

    Examples:
      | name                   |
      | conformance_lower_case |
      | CONFORMANCE_API_TOKEN  |

  @id:exec-working-dir @req:SDP1-S03 @req:SKETCH-005 @req:REST-002 @must
  Scenario: A command runs in the working directory it is given
    When there is a directory "conformance-wd" in the sandbox
    And I run `pwd` in that directory, given by its absolute path
    Then stdout is that directory's absolute path, followed by a newline

  @id:exec-binary-output @req:SDP1-035 @must
  Scenario: Command output is binary-safe: every byte value comes back unchanged
    When I run a command that writes every byte value from 0 to 255 to stdout
    Then stdout is exactly every byte value from 0 to 255, in order

  @id:exec-binary-stderr @req:SDP1-035 @must
  Scenario: stderr is binary-safe too: every byte value comes back unchanged
    When I run a command that writes every byte value from 0 to 255 to stderr
    Then stderr is exactly every byte value from 0 to 255, in order

  # Each probe prints the expected text only under plain `bash -c`, and always exits 0.
  @id:exec-bash-contract @req:SDP1-066 @req:SKETCH-005 @req:REST-002 @must
  Scenario Outline: A command runs under plain Bash: <property>
    When I run `<probe>`
    Then stdout is exactly "<answer>"

    Examples:
      | property            | probe                                                                                                 | answer            |
      | bash-never-sh       | printf '%s' "${BASH_VERSION:+bash}"; if shopt -qo posix; then printf ' emulating sh'; fi              | bash              |
      | not-a-login-shell   | if shopt -q login_shell; then printf 'login shell'; else printf 'not a login shell'; fi               | not a login shell |
      | no-errexit          | false; printf 'still running'                                                                         | still running     |
      | no-pipefail         | false \| true; printf 'pipeline status %s' "$?"                                                       | pipeline status 0 |
      | not-posix-mode      | case ":$SHELLOPTS:" in *:posix:*) printf 'posix mode';; ::) printf 'not bash';; *) printf 'bash mode';; esac | bash mode |

  @id:exec-command-literal @req:SDP1-066 @req:SKETCH-005 @req:REST-002 @must
  Scenario: The command text reaches Bash exactly as written: quotes, globs, variables in single quotes, Unicode
    When I run `printf '%s|' 'single $HOME' "double \"quoted\"" '*' 'back\slash' '$(echo substituted)' "it's" 'naïve ✓ 日本語'`
    Then stdout is exactly "single $HOME|double "quoted"|*|back\slash|$(echo substituted)|it's|naïve ✓ 日本語|"

  @id:exec-bash-env-ignored @req:SDP1-067 @must @dialect:sandbox-driver-v1
  Scenario: BASH_ENV never reaches the shell, even when the command's own env sets it
    Given a Bash startup file in the sandbox that prints "the startup file was sourced; "
    When I run `printf 'the command ran'` with BASH_ENV pointing at that startup file
    Then stdout is exactly "the command ran"

  # The command writes: ESC [31m red ESC [0m BEL SOH LF. No sanitization given means raw.
  @id:exec-bash-env-from-sandbox-env @req:SDP1-067 @must @dialect:sandbox-driver-v1
  Scenario: BASH_ENV given in the sandbox's own variables never reaches the shell either
    Given a sandbox created with BASH_ENV naming a startup file that prints "the startup file was sourced; "
    When I run `printf 'the command ran'`
    Then stdout is exactly "the command ran"

  @id:exec-output-sanitization @req:SDP1-069 @req:SDP1-070 @req:SKETCH-005 @req:REST-002 @must
  Scenario Outline: Output sanitization <sanitization> leaves exactly the bytes it promises, on both streams
    When I run `printf '\033[31mred\033[0m\007\001\n'; printf '\033[31mred\033[0m\007\001\n' >&2` with output sanitization <sanitization>
    Then stdout is exactly the bytes "<stdout>"
    And stderr is exactly the bytes "<stdout>"

    Examples:
      | sanitization | stdout                          |
      | not given    | ESC [31m red ESC [0m BEL SOH LF |
      | raw          | ESC [31m red ESC [0m BEL SOH LF |
      | strip_ansi   | red BEL SOH LF                  |
      | strip_all    | red LF                          |

  # Sanitization keeps its state per stream (section 5.5): an escape sequence still open on stdout when stderr
  # is written takes nothing from stderr, and is still removed whole once it ends.
  @id:exec-sanitization-per-stream @req:SDP1-069 @req:SDP1-070 @must
  Scenario: A sequence left open on stdout while stderr is written takes nothing from stderr
    When I run `printf 'a\033'; sleep 0.5; printf 'err' >&2; sleep 0.5; printf '[31mb\033[0m\n'` with output sanitization strip_ansi
    Then stdout is exactly "ab\n"
    And stderr is exactly "err"

  # Every family of escape sequence (CSI with its parameter and intermediate bytes, OSC, DCS/SOS/PM/APC strings,
  # ESC with intermediates such as a character set designation, two-byte escapes such as ESC =), each form of its
  # ending, the controls strip_all keeps (TAB, LF, CR), and UTF-8 text: the lead byte 0xC2 of the degree, plus-minus,
  # micro and copyright signs introduces no C1 control, and the Arabic semicolon's byte 0x9B is no CSI. A CSI
  # sequence ends at any final byte from @ to ~ (ESC [3~ is the Delete key, ESC [200~ starts a bracketed paste),
  # a string also ends at the UTF-8-encoded C1 string terminator (U+009C), and a standalone UTF-8-encoded C1
  # control such as NEL (U+0085) is a control character: strip_all removes it, strip_ansi keeps it.
  @id:sanitization-families @req:SDP1-069 @req:SDP1-070 @must @dialect:sandbox-driver-v1
  Scenario Outline: Output sanitization <mode> removes <what>
    When I run a command that writes the bytes "<written>" with output sanitization <mode>
    Then stdout is exactly the bytes "<kept>"

    Examples:
      | case | what | mode | written | kept |
      | strip_ansi a private-mode CSI sequence | a private-mode CSI sequence | strip_ansi | a ESC [?25l b | a b |
      | strip_all a private-mode CSI sequence | a private-mode CSI sequence | strip_all | a ESC [?25l b | a b |
      | strip_ansi an OSC ended by the string terminator | an OSC ended by the string terminator | strip_ansi | a ESC ]8;;https://example.invalid/ ST b | a b |
      | strip_all an OSC ended by the string terminator | an OSC ended by the string terminator | strip_all | a ESC ]8;;https://example.invalid/ ST b | a b |
      | strip_ansi an OSC ended by BEL | an OSC ended by BEL | strip_ansi | a ESC ]0;title BEL b | a b |
      | strip_ansi a DCS string | a DCS string | strip_ansi | a ESC P1$r ST b | a b |
      | strip_all a DCS string | a DCS string | strip_all | a ESC P1$r ST b | a b |
      | strip_ansi a UTF-8 encoded C1 CSI | a UTF-8 encoded C1 CSI | strip_ansi | a C1CSI 1m b | a b |
      | strip_all a UTF-8 encoded C1 CSI | a UTF-8 encoded C1 CSI | strip_all | a C1CSI 1m b | a b |
      | strip_ansi a UTF-8 encoded C1 OSC | a UTF-8 encoded C1 OSC | strip_ansi | a C1OSC 0;title BEL b | a b |
      | strip_all no CR, TAB or LF | no CR, TAB or LF | strip_all | a CR LF b TAB c | a CR LF b TAB c |
      | strip_all only the other controls | only the other controls | strip_all | a VT b FF c BEL d | a b c d |
      | strip_ansi no standalone control | no standalone control | strip_ansi | a VT b FF c CR LF d | a VT b FF c CR LF d |
      | strip_ansi a CSI sequence with an intermediate byte | a CSI sequence with an intermediate byte | strip_ansi | a ESC [2 SP q b | a b |
      | strip_all a CSI sequence with an intermediate byte | a CSI sequence with an intermediate byte | strip_all | a ESC [2 SP q b | a b |
      | strip_ansi a character set designation | a character set designation | strip_ansi | a ESC (B b ESC )0 c | a b c |
      | strip_all a character set designation | a character set designation | strip_all | a ESC (B b ESC )0 c | a b c |
      | strip_ansi the two-byte keypad escapes | the two-byte keypad escapes | strip_ansi | a ESC = b ESC > c | a b c |
      | strip_all the two-byte keypad escapes | the two-byte keypad escapes | strip_all | a ESC = b ESC > c | a b c |
      | strip_ansi SOS, PM and APC strings | SOS, PM and APC strings | strip_ansi | a ESC Xsos ST b ESC ^pm ST c ESC _apc ST d | a b c d |
      | strip_all SOS, PM and APC strings | SOS, PM and APC strings | strip_all | a ESC Xsos ST b ESC ^pm ST c ESC _apc ST d | a b c d |
      | strip_ansi nothing of UTF-8 text | nothing of UTF-8 text | strip_ansi | 20° ±1 µs © ؛ | 20° ±1 µs © ؛ |
      | strip_all nothing of UTF-8 text | nothing of UTF-8 text | strip_all | 20° ±1 µs © ؛ | 20° ±1 µs © ؛ |
      | strip_ansi a CSI sequence whose final byte is no letter | a CSI sequence whose final byte is no letter | strip_ansi | a ESC [3~ b ESC [200~ c C1CSI 201~ d | a b c d |
      | strip_all a CSI sequence whose final byte is no letter | a CSI sequence whose final byte is no letter | strip_all | a ESC [3~ b ESC [200~ c C1CSI 201~ d | a b c d |
      | strip_ansi an OSC ended by the UTF-8 encoded C1 string terminator | an OSC ended by the UTF-8 encoded C1 string terminator | strip_ansi | a ESC ]0;title C1ST b C1OSC 2;icon C1ST c | a b c |
      | strip_all an OSC ended by the UTF-8 encoded C1 string terminator | an OSC ended by the UTF-8 encoded C1 string terminator | strip_all | a ESC ]0;title C1ST b C1OSC 2;icon C1ST c | a b c |
      | strip_ansi a DCS string ended by the UTF-8 encoded C1 string terminator | a DCS string ended by the UTF-8 encoded C1 string terminator | strip_ansi | a ESC P1$r C1ST b | a b |
      | strip_all a DCS string ended by the UTF-8 encoded C1 string terminator | a DCS string ended by the UTF-8 encoded C1 string terminator | strip_all | a ESC P1$r C1ST b | a b |
      | strip_all a standalone UTF-8 encoded C1 control | a standalone UTF-8 encoded C1 control | strip_all | a C1NEL b | a b |
      | strip_ansi no standalone UTF-8 encoded C1 control | no standalone UTF-8 encoded C1 control | strip_ansi | a C1NEL b | a C1NEL b |

  # raw, strip_ansi and strip_all are the only modes; params naming another cannot be decoded, so the request is
  # refused as invalid before anything runs: never run as raw, or with whatever mode the name resembles.
  @id:exec-sanitization-undefined @req:SDP1-069 @req:SDP1-042 @must @dialect:sandbox-driver-v1
  Scenario: An output sanitization the protocol does not define is refused as an invalid request
    When I run `printf ran` buffered and streamed, each asking for the output sanitization "strip_colour", which the protocol does not define
    Then both requests are answered with the JSON-RPC error -32600 "invalid request"

  @id:exec-stdin @req:SDP1-075 @cap:exec.stdin @req:SKETCH-013 @must
  Scenario: The bytes given as stdin reach the command, followed by end of file
    When I run `od -An -v -tx1 | tr -d ' \n'` with every byte value from 0 to 255 as its stdin
    Then stdout is every byte value from 0 to 255, in order, as hex

  # Stdin and variables travel in one spec: giving the one must not drop the other.
  @id:exec-stdin-with-env @req:SDP1-S02 @req:SDP1-075 @cap:exec.stdin @must
  Scenario: A command given stdin sees the variables given with it too
    When I run `printf '%s:%s' "$(cat)" "$CONFORMANCE_WITH_STDIN"` with the variable CONFORMANCE_WITH_STDIN set to "variable" and "input" as its stdin
    Then stdout is exactly "input:variable"

  @id:exec-stdin-empty @req:SDP1-075 @cap:exec.stdin @req:SKETCH-013 @must
  Scenario: An empty stdin is an immediate end of file
    When I run `cat; printf 'saw end of file'` with an empty stdin and a timeout of 5 seconds
    Then the command ran and exited with code 0
    And stdout is exactly "saw end of file"

  @id:exec-stdin-large @req:SDP1-075 @cap:exec.stdin @req:SKETCH-013 @must
  Scenario: Stdin far larger than a pipe's buffer reaches the command whole
    When I run `sha256sum` with 300 KiB of patterned bytes as its stdin
    Then stdout starts with the SHA-256 of those bytes

  @id:exec-stdin-broken-pipe @req:SDP1-075 @cap:exec.stdin @req:SKETCH-013 @must
  Scenario: A command that stops reading its stdin early is not an error
    When I run `head -c 1` with a megabyte of the letter x as its stdin
    Then the command ran and exited with code 0
    And stdout is exactly "x"

  @id:exec-stdin-unread-timeout @req:SDP1-074 @req:SDP1-075 @cap:exec.stdin @req:SKETCH-013 @must
  Scenario: A command that never reads a large stdin still times out on time
    When I run `sleep 30` with a megabyte of the letter x as its stdin and a timeout of 1 second
    Then the result says the command timed out, at most 4 seconds after the timeout

  # Not SKETCH-011: the sketch states no shape for a timeout's answer (sketch-exec-timeout checks the stop).
  @id:exec-timeout-ends-children @req:SDP1-074 @should
  Scenario: A command that times out is stopped with everything it started
    When I run a command that starts a background sleep, noting its pid, with a timeout of 1 second
    Then the result says the command timed out, at most 4 seconds after the timeout
    And the background sleep has ended too

  @id:exec-foreign-signal @req:GAP-3 @req:SDP1-072 @must
  Scenario: A command ended by a signal reports that signal's number
    When I run `kill -TERM $$; sleep 5`
    Then the command was ended by signal 15

  # The command ends by itself after 10 seconds, so a provider that ignores the timeout fails quickly.
  # Timeouts are per dialect: the sandbox-driver timeout_ms and duration_ms (SDP1-074, SDP1-036, which v2
  # carries) here, the sketch's whole-second timeout_secs, with an answer of no stated shape (SKETCH-011), in
  # sketch-exec-timeout.
  @id:exec-timeout @req:SDP1-074 @req:SDP1-036 @must
  Scenario: A command that outlives its timeout is a normal result that says it timed out
    When I run `printf started; sleep 10; printf finished` with a timeout of 1 second
    Then the result says the command timed out, at most 4 seconds after the timeout
    And its duration is a whole number of milliseconds, at least the 1 second timeout

  # The sleep makes a timeout rounded down to zero fail (the command would be stopped at once); it is short
  # so that a slow start (a login shell, a loaded machine) still ends well within the 0.9 s.
  @id:exec-timeout-subsecond @req:SDP1-036 @req:SDP1-074 @must
  Scenario: A timeout of less than a second is a timeout of that many milliseconds, not of zero seconds
    When I run `sleep 0.1; printf quick` with a timeout of 0.9 seconds
    Then the command ran and exited with code 0
    And stdout is exactly "quick"

  @id:exec-within-timeout @req:SDP1-036 @req:SDP1-074 @req:REST-015 @must
  Scenario: A command that ends within its timeout is not cut short
    When I run `sleep 2; printf finished` with a timeout of 5 seconds
    Then the command ran and exited with code 0
    And stdout is exactly "finished"

  # The sketch's only termination is "exited": it states no shape for a timeout's answer. That the answer
  # is a result saying timed_out, not an error, is GAP 3's question (timeout-is-not-an-exit-code). The forkd
  # plugin over forkd 0.5.2 answers about 5 seconds after the timeout (its controller's read gives up then),
  # having stopped the command at it: the marker file tells a stopped command from one answered but left running.
  @id:sketch-exec-timeout @req:SKETCH-011 @must @dialect:fabro-sketch
  Scenario: A command that outlives its timeout_secs is stopped at it, and answered
    When I run `printf started; sleep 3; touch conformance-outlived-timeout; sleep 7; printf finished` with a timeout of 1 second
    Then the command was ended at its timeout: answered, with a result or an error, at most 8 seconds after it
    And the command never got as far as creating "conformance-outlived-timeout", 3 seconds into it

  @id:exec-relative-working-dir @req:SDP1-081 @must
  Scenario: A relative working directory is taken relative to the sandbox's working directory
    When there is a directory "conformance-relative-wd" in the sandbox
    And I run `pwd` in that directory, given by its path relative to the sandbox's working directory
    Then stdout is that directory's absolute path, followed by a newline
