/**
 * What `/help`, `/status`, `/sandbox` and `/model` show: the commands and keys, the session and its
 * sandbox as it stands, the model with its window, price and what the session spent.
 *
 * @example
 * ```ts
 * screen.print(helpLines(style, registry.list()))
 * ```
 */
import type { SessionRuntime } from "@musekit/node"
import { Sandbox } from "@musekit/node"
import { Effect } from "effect"
import { escapeUnsafe, type Style } from "../ansi.js"
import * as ModelInfo from "../modelInfo.js"
import * as Render from "../render.js"
import type { SlashCommand } from "./commands.js"

/** The commands (the session's first, then muse's own) and the keys. */
export const helpLines = (s: Style, commands: ReadonlyArray<SlashCommand>): Array<string> => {
  const session = commands.filter((c) => c.run === undefined)
  const own = commands.filter((c) => c.run !== undefined)
  const rows: Array<[string, string]> = [
    ...session.map((k): [string, string] => [
      `/${escapeUnsafe(k.name, s)}`,
      escapeUnsafe(k.description.split(". ")[0]!, s)
    ]),
    ...own.map((c): [string, string] => [`/${c.name}`, c.description])
  ]
  return [
    s.bold("Type a task and press enter. Commands:"),
    ...rows.map(([n, d]) => `  ${s.cyan(n.padEnd(10))} ${d}`),
    "",
    s.bold("Keys:"),
    `  ${s.cyan("tab".padEnd(10))} complete a command`,
    `  ${s.cyan("↑ ↓".padEnd(10))} input history`,
    `  ${s.cyan("ctrl-c".padEnd(10))} cancel the running turn; twice: exit`,
    `  ${s.cyan("ctrl-d".padEnd(10))} exit (the session is saved; muse resume continues it)`
  ]
}

/**
 * The sandbox as it stands: the session's sandbox service says (its launch, and why a long-lived
 * sandbox fell back to one per command); before it runs, the mode set here and this machine's probe.
 */
export const sandboxStatus = (
  service: Sandbox.Service | undefined,
  mode: Sandbox.Mode,
  settings: SessionRuntime.Config["sandbox"]
): Sandbox.Status => {
  if (service) return { ...Effect.runSync(service.status), mode }
  const availability = Sandbox.detect()
  return {
    mode,
    active: mode !== "off" && availability.available,
    availability,
    network: settings?.network?.allow ?? [],
    writable: settings?.writable ?? [],
    processes: settings?.processes ?? Sandbox.DEFAULT_PROCESSES,
    launch: availability.backend === "bubblewrap" && settings?.reuse !== false ? "long-lived" : "per-command",
    launchReason: undefined
  }
}

export const statusLines = (
  s: Style,
  o: {
    readonly session: string
    readonly root: string
    readonly model: string
    readonly approvalMode: string
    readonly sandbox: Sandbox.Status
    /** More lines: what was read from where (plugins, agents, hooks, commands). */
    readonly extra?: ReadonlyArray<string> | undefined
  }
): Array<string> => {
  const st = o.sandbox
  const line = escapeUnsafe(Sandbox.describe(st), s)
  return [
    `${s.bold("session")} ${escapeUnsafe(o.session, s)} · ${escapeUnsafe(o.root, s)}`,
    `  model ${escapeUnsafe(o.model, s)} · approvals ${escapeUnsafe(o.approvalMode, s)}`,
    `  ${st.active || st.mode === "off" ? line : s.yellow(line)}`,
    ...(st.writable.length > 0 ? [s.dim(`  also writable: ${escapeUnsafe(st.writable.join(", "), s)}`)] : []),
    ...(o.extra ?? []),
    s.dim("  /sandbox workspace-write|read-only|off changes it; /approve changes the approval mode")
  ]
}

export const modelLines = (s: Style, model: string, source: string, totals: Render.Totals): Array<string> => {
  const info = ModelInfo.lookup(model)
  const price = info?.pricing
    ? `$${info.pricing.input}/$${info.pricing.output} per million tokens in/out`
    : "no list price known"
  return [
    `${s.bold(escapeUnsafe(model, s))} ${s.dim(`(from ${escapeUnsafe(source, s)})`)}`,
    s.dim(`  context window ${Render.fmtInt(ModelInfo.contextWindow(model))} tokens · ${price}`),
    s.dim(`  this session: ${totals.describe()}`),
    s.dim("  A session keeps its model; start another with: muse --model <provider/model>")
  ]
}
