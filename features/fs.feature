Feature: Files in the sandbox
  A sandbox's files can be written, read, listed, renamed and deleted without running a command.
  Contents are bytes and come back exactly as written. A relative path means a path under the
  sandbox's working directory, the same place a command runs in by default. Reads and writes
  take an optional offset, length and append; a request that leaves them out means what such
  requests always meant: read the whole file, replace the whole file.

  Background:
    Given a sandbox

  # -- contents ------------------------------------------------------------------------------------

  @id:fs-binary-round-trip @req:SDP1-035 @req:SKETCH-013 @must
  Scenario Outline: Whatever bytes are written to a file are read back unchanged
    When I write <content> to "<file>"
    Then reading "<file>" gives back exactly the bytes written

    Examples:
      | content                        | file           |
      | every byte value from 0 to 255 | all-values.bin |
      | 300 KiB of patterned bytes     | large.bin      |
      | 2048 KiB of patterned bytes    | huge.bin       |

  @id:fs-write-empty @req:SDP1-084 @req:SKETCH-013 @must
  Scenario: Writing no bytes empties an existing file, and creates a missing one empty
    Given a file "notes.txt" containing "some text"
    When I write nothing to "notes.txt"
    And I write nothing to "new-and-empty.txt"
    Then reading "notes.txt" gives back exactly the bytes written
    And reading "new-and-empty.txt" gives back exactly the bytes written

  @id:fs-paths-per-sandbox @req:SDP1-081 @req:SKETCH-013 @must
  Scenario: The same relative path names a different file in each sandbox
    When I write generated text to "same-name.txt"
    And another sandbox holds other text at "same-name.txt"
    Then reading "same-name.txt" gives back exactly the bytes written
    And reading "same-name.txt" in the other sandbox gives back its own text

  @id:fs-write-creates-parents @req:SDP1-082 @req:SKETCH-013 @must
  Scenario: Writing a file creates the directories above it that are missing
    When I write generated text to "drafts/2024/june/note.txt"
    Then reading "drafts/2024/june/note.txt" gives back exactly the bytes written

  @id:fs-read-range @req:SDP1-083 @req:SKETCH-013 @must
  Scenario Outline: A read starts at its offset, stops after its length, and finds nothing at or past the end
    Given a file "letters.txt" containing "abcdefghijklmnopqrstuvwxyz"
    When I read "letters.txt" with offset <offset> and length <length>
    Then the read returns <expected>

    Examples:
      | case                         | offset | length | expected                     |
      | whole file                   | unset  | unset  | "abcdefghijklmnopqrstuvwxyz" |
      | first bytes                  | unset  | 5      | "abcde"                      |
      | from an offset to the end    | 20     | unset  | "uvwxyz"                     |
      | a slice                      | 10     | 3      | "klm"                        |
      | a slice running past the end | 24     | 10     | "yz"                         |
      | zero length                  | 3      | 0      | nothing                      |
      | at the end                   | 26     | unset  | nothing                      |
      | past the end                 | 40     | 5      | nothing                      |

  @id:fs-write-replaces @req:SDP1-084 @req:SDP1-085 @req:SKETCH-013 @must
  Scenario: A write that does not mention appending replaces the whole file, and a plain read returns all of it
    Given a file "report.txt" holding generated text
    When I write shorter generated text to "report.txt" without saying whether to append
    Then reading "report.txt" gives back exactly the bytes written

  @id:fs-write-append-false-replaces @req:SDP1-084 @req:SKETCH-013 @must
  Scenario: A write with append set to false replaces the whole file
    Given a file "summary.txt" holding generated text
    When I write shorter generated text to "summary.txt" with append set to false
    Then reading "summary.txt" gives back exactly the bytes written

  @id:fs-append-appends @req:SDP1-084 @req:SKETCH-013 @must
  Scenario: A write with append set to true adds to the end of the file
    Given a file "journal.log" holding generated text
    When I append generated text to "journal.log"
    Then reading "journal.log" gives back the first text followed by the appended text

  @id:fs-append-creates-file @req:SDP1-084 @req:SKETCH-013 @must
  Scenario: Appending to a file that does not exist creates it
    When I append generated text to a file with a generated name that does not exist yet
    Then reading that file gives back exactly the bytes appended

  @id:fs-append-creates-parents @req:SDP1-082 @req:SDP1-084 @req:SKETCH-013 @must
  Scenario: Appending to a file creates the directories above it that are missing
    When I append generated text to "logs/2024/june/app.log", which does not exist yet
    Then reading "logs/2024/june/app.log" gives back exactly the bytes written

  @id:fs-read-missing-file @req:SDP1-S15 @req:SDP1-045 @req:SKETCH-013 @must
  Scenario: Reading a file that does not exist fails as not found or as an I/O error
    When I read a file with a generated name that does not exist
    Then the read fails with the error kind not_found, naming a file if it names a resource, or io

  # The sandbox is asked for before the path: a file call in a sandbox that is not there is refused for the
  # sandbox, never answered as if the file were missing.
  @id:fs-unknown-sandbox @req:SDP1-S17 @req:SDP1-045 @req:SKETCH-013 @must
  Scenario Outline: A file call naming a sandbox id the provider never issued is refused as not_found: <call>
    When I <call> in a sandbox id that was never issued
    Then that file call is refused as not_found, naming the sandbox if it names a resource

    Examples:
      | call                        |
      | read a file                 |
      | check whether a path exists |
      | write a file                |

  # -- paths ---------------------------------------------------------------------------------------

  @id:fs-relative-paths @req:SDP1-081 @req:SKETCH-013 @must
  Scenario: A relative path names the same file for the filesystem, for commands, and as an absolute path
    When I write generated text to "relative/x.txt"
    And I run `cat relative/x.txt`
    Then the command ran and exited with code 0
    And stdout is exactly the bytes written to "relative/x.txt"
    And reading "relative/x.txt" under the sandbox's working directory, by its absolute path, gives back exactly the bytes written
    When a command writes generated text to "relative/y.txt"
    Then reading "relative/y.txt" gives back exactly the bytes the command wrote

  @id:fs-exists @req:SDP1-S09 @req:SKETCH-013 @must
  Scenario: A written file exists and a path nothing was written to does not
    Given a file "present.txt" holding generated text
    Then "present.txt" exists
    And a path with a generated name does not exist

  # -- metadata ------------------------------------------------------------------------------------

  @id:fs-metadata-kinds @req:SDP1-086 @req:SKETCH-013 @must
  Scenario: Metadata tells a file and a directory apart
    Given a file "kinds/plain.txt" holding generated text
    And a directory "kinds/folder" made with the filesystem
    Then the metadata of "kinds/plain.txt" says it is a file
    And the metadata of "kinds/folder" says it is a directory

  # The protocol only says kind is one of file, directory, symlink or other: a provider that reports what
  # a link points to (stat rather than lstat) breaks no MUST, so naming the link itself is a SHOULD.
  @id:fs-metadata-symlink @req:SDP1-S19 @req:SKETCH-013 @should
  Scenario: Metadata of a symbolic link says it is a symlink
    Given a file "kinds/plain.txt" holding generated text
    And a command has made "kinds/link" a symbolic link to "plain.txt"
    Then the metadata of "kinds/link" says it is a symlink

  @id:fs-metadata-size-and-mode @req:SDP1-086 @req:SKETCH-013 @must
  Scenario: Metadata gives a file's size in bytes and its permissions as a number
    Given a file "sized.txt" holding generated text
    And a command has set the permissions of "sized.txt" to 640
    Then the metadata of "sized.txt" gives the number of bytes written as its size
    And the metadata of "sized.txt" gives a numeric mode with the permission bits 640

  # -- directories ---------------------------------------------------------------------------------

  @id:fs-create-dir @req:SDP1-S13 @req:SDP1-086 @req:SKETCH-013 @must
  Scenario: A created directory exists and is a directory
    When I create the directory "workbench"
    Then "workbench" exists
    And the metadata of "workbench" says it is a directory

  # Hidden entries (names starting with a dot) are entries like any other: a listing is not a shell glob.
  @id:fs-list-dir-depth @req:SDP1-S10 @req:SDP1-086 @req:SKETCH-013 @must
  Scenario Outline: A listing goes as many levels deep as asked, hidden entries included, with paths relative to the listed directory
    Given a directory "tree" holding the files "top.txt", ".hidden", "sub/inner.txt" and "sub/deeper/deepest.txt"
    When I list "tree" to depth <depth>
    Then the listing holds exactly <entries>
    And every listed entry has the kind of what was written there

    Examples:
      | depth | entries                                                       |
      | 1     | "top.txt", ".hidden" and "sub"                                |
      | 2     | "top.txt", ".hidden", "sub", "sub/inner.txt" and "sub/deeper" |

  @id:fs-list-dir-symlink @req:SDP1-S19 @req:SKETCH-013 @should
  Scenario: A listing reports a symbolic link as a symlink, and does not descend through it
    Given a file "linked/target-dir/inside.txt" holding generated text
    And a command has made "linked/dir-link" a symbolic link to "target-dir"
    When I list "linked" to depth 2
    Then the listing reports "dir-link" as a symlink, and nothing beneath it

  @id:fs-list-dir-many @req:SDP1-086 @req:SKETCH-013 @must
  Scenario: A listing of a directory with many entries names every one of them
    Given a command has made 1500 files in "crowded"
    When I list "crowded" to depth 1
    Then the listing names all 1500 files

  # -- rename and delete ---------------------------------------------------------------------------

  @id:fs-rename @req:SDP1-S11 @req:SKETCH-013 @must
  Scenario: A renamed file is gone from its old path and has its bytes at the new one
    Given a file "draft.txt" holding generated text
    When I rename "draft.txt" to "final.txt"
    Then "draft.txt" does not exist
    And reading "final.txt" gives back exactly the bytes written

  @id:fs-delete-file @req:SDP1-S12 @req:SKETCH-013 @must
  Scenario: A deleted file no longer exists
    Given a file "obsolete.txt" holding generated text
    When I delete the file "obsolete.txt"
    Then the deletion succeeds
    And "obsolete.txt" does not exist

  @id:fs-delete-recursive @req:SDP1-S12 @req:SKETCH-013 @must
  Scenario: A recursive delete removes a directory with everything in it
    Given a directory "scratch" holding the files "a.txt" and "nested/b.txt"
    When I delete the directory "scratch" recursively
    Then the deletion succeeds
    And "scratch" does not exist

  # Like metadata and listings (SDP1-S19), a delete acts on the link itself: removing the directory a link
  # points to, as `rm -rf link/` would, destroys files at paths the request never named.
  @id:fs-delete-symlink-keeps-target @req:SDP1-S19 @req:SKETCH-013 @should
  Scenario: A recursive delete of a symbolic link to a directory removes the link and leaves the directory
    Given a file "linked/target-dir/inside.txt" holding generated text
    And a command has made "linked/dir-link" a symbolic link to "target-dir"
    When I delete the link "linked/dir-link" recursively
    Then the deletion succeeds
    And "linked/dir-link" does not exist
    And reading "linked/target-dir/inside.txt" gives back exactly the bytes written

  @id:fs-delete-non-recursive-refuses @req:SDP1-S12 @req:SKETCH-013 @must
  Scenario: A delete that is not recursive refuses a directory that is not empty and leaves it in place
    Given a directory "keep" holding the files "a.txt" and "nested/b.txt"
    When I delete the directory "keep" without recursion
    Then the deletion is refused
    And reading "keep/a.txt" gives back exactly the bytes written
    And reading "keep/nested/b.txt" gives back exactly the bytes written

  @id:fs-delete-empty-directory @req:SDP1-S12 @req:SKETCH-013 @must
  Scenario: A delete that is not recursive removes an empty directory
    Given a directory "vacant" made with the filesystem
    When I delete the directory "vacant" without recursion
    Then the deletion succeeds
    And "vacant" does not exist

  # -- permissions ---------------------------------------------------------------------------------

  @id:fs-set-permissions @req:SDP1-S14 @req:SDP1-086 @cap:fs.permissions @req:SKETCH-013 @must
  Scenario: Setting a file's permissions changes the mode its metadata reports
    Given a file "secret.txt" holding generated text
    And a command has set the permissions of "secret.txt" to 644
    When I set the permissions of "secret.txt" to 600
    Then the metadata of "secret.txt" gives a numeric mode with the permission bits 600
    When I set the permissions of "secret.txt" to 777
    Then the metadata of "secret.txt" gives a numeric mode with the permission bits 777
