// Tests and the fuzz target: everything a ManifestReader hands out for a
// manifest's bytes - every entry with every field, the final status (its
// message names the file and the byte), the summary - as text, so that two
// ways of reading the same bytes (the store-layout scanner on and off) can
// be compared and, when they differ, shown.
#ifndef ARGSDUMP_VIEWER_MANIFEST_TRANSCRIPT_H_
#define ARGSDUMP_VIEWER_MANIFEST_TRANSCRIPT_H_

#include <cstddef>
#include <string>

#include "viewer/manifest_reader.h"

namespace argsdump {

// One line per field of `e`, numbers exact (doubles as their bits).
std::string DescribeEntry(const ManifestEntry& e);

// Reads `manifest` (named "fuzz.json" in errors) with `filter` through
// Next(), at most `max_entries` entries, `buffer_bytes` at a time, the
// scanner as `scanner` says.
std::string ReadTranscript(const std::string& manifest, const EntryFilter& filter,
                           bool scanner, size_t max_entries, size_t buffer_bytes = 1 << 20);

}  // namespace argsdump

#endif  // ARGSDUMP_VIEWER_MANIFEST_TRANSCRIPT_H_
