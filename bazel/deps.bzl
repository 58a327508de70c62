"""Everything argsdump needs from outside its own tree, declared by one macro.

argsdump's own WORKSPACE and any workspace that depends on argsdump call it:

    local_repository(name = "argsdump", path = "path/to/argsdump")
    load("@argsdump//bazel:deps.bzl", "argsdump_dependencies")
    argsdump_dependencies()

It declares, offline (Bazel 4.2.3, Debian's packages; nothing downloads):
  - stand-ins for the three repositories Bazel 4.2.3's built-in WORKSPACE
    suffix would otherwise download for a C++ build: @rules_cc,
    @rules_java and @remote_coverage_tools (skipped when the workspace
    already declares them);
  - @argsdump_protoc: the system protoc and grpc_cpp_plugin
    (protobuf-compiler, protobuf-compiler-grpc), as labels;
  - @argsdump_grpc_proto: gRPC's .proto files (grpc-proto), e.g. health.
The system libraries themselves are plain link options in
//third_party:BUILD.bazel. The repository argsdump is declared under may
have any name: no label here or in argsdump's BUILD files names it.
"""

# The repository these files live in, as a label prefix: "@" for the main
# repository (argsdump's own workspace), "@<name>" when another workspace
# declared argsdump as <name>.
_SELF = "@" + Label("//:BUILD.bazel").workspace_name

def _linked_files_impl(ctx):
    for label, path in ctx.attr.files.items():
        ctx.symlink(ctx.path(label), path)

# A repository made of files of argsdump's tree (the stand-ins).
_linked_files_repository = repository_rule(
    implementation = _linked_files_impl,
    attrs = {"files": attr.label_keyed_string_dict(allow_files = True)},
)

def _system_files_impl(ctx):
    for path, target in ctx.attr.links.items():
        if not ctx.path(target).exists:
            fail("argsdump: %s is missing; install the Debian package %s (tools/setup.sh does)" %
                 (target, ctx.attr.package))
        ctx.symlink(target, path)
    ctx.template("BUILD.bazel", ctx.attr.build_file, {"@ARGSDUMP@": ctx.attr.self}, executable = False)

# Files of a Debian package, linked into a repository with a BUILD file
# (@ARGSDUMP@ in it becomes argsdump's repository).
_system_files_repository = repository_rule(
    implementation = _system_files_impl,
    attrs = {
        "links": attr.string_dict(mandatory = True),
        "package": attr.string(mandatory = True),
        "build_file": attr.label(mandatory = True, allow_single_file = True),
        "self": attr.string(mandatory = True),
    },
)

def _stub(name, files):
    if native.existing_rule(name) == None:
        _linked_files_repository(
            name = name,
            files = {Label("//third_party/%s_stub%s" % (name, label)): path for label, path in files.items()},
        )

def argsdump_dependencies():
    """Declares the repositories argsdump builds with (see the file's doc)."""

    # @bazel_tools//tools/cpp and @local_config_cc load @rules_cc//cc:defs.bzl.
    # (Debian's bazel-rules-cc 0.0.4 is not usable: it needs Bazel >= 5.)
    _stub("rules_cc", {
        ":WORKSPACE": "WORKSPACE",
        ":BUILD.bazel": "BUILD.bazel",
        "/cc:BUILD.bazel": "cc/BUILD.bazel",
        "/cc:defs.bzl": "cc/defs.bzl",
    })

    # Toolchain resolution parses @bazel_tools//tools/jdk:all, which loads
    # @rules_java//java:defs.bzl (even for pure C++ builds).
    _stub("rules_java", {
        ":WORKSPACE": "WORKSPACE",
        ":BUILD.bazel": "BUILD.bazel",
        "/java:BUILD.bazel": "java/BUILD.bazel",
        "/java:defs.bzl": "java/defs.bzl",
    })

    # Every test rule depends on
    # @bazel_tools//tools/test:coverage_report_generator -> @remote_coverage_tools.
    _stub("remote_coverage_tools", {
        ":WORKSPACE": "WORKSPACE",
        ":BUILD.bazel": "BUILD.bazel",
        ":unsupported.sh": "unsupported.sh",
    })

    if native.existing_rule("argsdump_protoc") == None:
        _system_files_repository(
            name = "argsdump_protoc",
            links = {
                "protoc": "/usr/bin/protoc",
                "grpc_cpp_plugin": "/usr/bin/grpc_cpp_plugin",
            },
            package = "protobuf-compiler and protobuf-compiler-grpc",
            build_file = Label("//third_party:system_protoc.BUILD"),
            self = _SELF,
        )

    if native.existing_rule("argsdump_grpc_proto") == None:
        _system_files_repository(
            name = "argsdump_grpc_proto",
            links = {"grpc": "/usr/share/grpc-proto/grpc"},
            package = "grpc-proto",
            build_file = Label("//third_party:grpc_proto.BUILD"),
            self = _SELF,
        )
