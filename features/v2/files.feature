@dialect:sandbox-driver-v2
Feature: Version 2 files: contents over data channels
  A version 2 file read or write moves the file's bytes over a data channel, in as many frames as it takes.
  Whatever a frame boundary falls on, the bytes come back exactly as written; a read's offset and length
  hold across frames. A write says how many bytes it will send, and a provider holds the host to it: too
  few is an I/O failure, too many is an invalid request naming content_length. A missing file is not found,
  naming a file. Missing parent directories are created, whatever characters their names hold.

  Background:
    Given a sandbox

  @id:v2-fs-round-trip @req:SDP2-035 @must
  Scenario Outline: A file of <size> bytes, split across frames however it falls, comes back exactly as written
    When I write <size> bytes of patterned content to "frames/<size>.bin"
    Then reading "frames/<size>.bin" gives back exactly those <size> bytes

    Examples:
      | size    |
      | 65535   |
      | 65536   |
      | 65537   |
      | 131072  |
      | 1048577 |

  @id:v2-fs-read-range @req:SDP2-083 @req:SDP2-035 @must
  Scenario Outline: A read's offset and length hold across frame boundaries: <case>
    Given a file "ranges.bin" of 204800 bytes of patterned content
    When I read "ranges.bin" from offset <offset> for <length> bytes
    Then the read returns exactly bytes <offset> to <end> of that content

    Examples:
      | case                            | offset | length | end    |
      | a slice across a frame boundary | 65530  | 12     | 65542  |
      | exactly one frame's worth       | 65536  | 65536  | 131072 |
      | one byte more than a frame      | 0      | 65537  | 65537  |
      | from an offset to the end       | 131072 | all    | 204800 |
      | nothing at all                  | 100    | 0      | 100    |

  @id:v2-fs-missing-file @req:SDP2-135 @must
  Scenario: Reading a file that does not exist fails as not found, naming a file
    When I read a file with a generated name that does not exist
    Then the read fails as not found, naming a file

  @id:v2-fs-content-length @req:SDP2-136 @must
  Scenario Outline: A write that sends <case> than it declared fails with <failure>
    When I write generated text to "declared/<file>", declaring <declared> than it sends
    Then the write failed with <failure>

    Examples:
      | case        | file      | declared       | failure                               |
      | fewer bytes | short.txt | one byte more  | an I/O failure                        |
      | more bytes  | long.txt  | one byte fewer | an invalid spec naming content_length |

  @id:v2-fs-parents-created @req:SDP2-136 @req:SDP2-082 @must
  Scenario: A write creates missing parent directories, whatever their names hold, and runs nothing
    When I write generated text to "made $(touch conformance-ran)/semi;colon/it's here/`id`/note.txt"
    Then reading "made $(touch conformance-ran)/semi;colon/it's here/`id`/note.txt" gives back exactly the bytes written
    And nothing named "conformance-ran" appeared in the sandbox's working directory
