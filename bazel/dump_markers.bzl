"""The build switch that compiles CoreTaskArgs::dump(...) markers out.

`--//bazel:dump_markers=false` (from another workspace:
`--@argsdump//bazel:dump_markers=false`) defines ARGSDUMP_NO_DUMP_MARKERS for
every target that depends on the sim core (device/sim/core_task_args.h): the
markers keep their signatures and compile-time checks and compile to no code.
"""

def _bool_setting_impl(_ctx):
    return []

bool_setting = rule(
    implementation = _bool_setting_impl,
    build_setting = config.bool(flag = True),
    doc = "A boolean build setting, set on the command line as --<label>=true|false.",
)

def _markers_transition_impl(_settings, attr):
    return {
        "//bazel:dump_markers": attr.dump_markers,
        "//command_line_option:compilation_mode": "opt",
    }

_markers_transition = transition(
    implementation = _markers_transition_impl,
    inputs = [],
    outputs = [
        "//bazel:dump_markers",
        "//command_line_option:compilation_mode",
    ],
)

def _binary_with_markers_impl(ctx):
    binary = ctx.attr.binary[0][DefaultInfo].files_to_run.executable
    out = ctx.actions.declare_file(ctx.label.name)
    ctx.actions.run_shell(
        inputs = [binary],
        outputs = [out],
        command = 'cp "$1" "$2"',
        arguments = [binary.path, out.path],
    )
    return [DefaultInfo(files = depset([out]), executable = out)]

binary_with_markers = rule(
    implementation = _binary_with_markers_impl,
    attrs = {
        "binary": attr.label(
            cfg = _markers_transition,
            executable = True,
            mandatory = True,
            doc = "a statically linked cc_binary",
        ),
        "dump_markers": attr.bool(mandatory = True),
        "_allowlist_function_transition": attr.label(
            default = "@bazel_tools//tools/allowlists/function_transition_allowlist",
        ),
    },
    executable = True,
    doc = """`binary` built optimised (-c opt) with --//bazel:dump_markers set to
`dump_markers`, whatever the command line says: for a test that looks at
the code the switch leaves.""",
)
