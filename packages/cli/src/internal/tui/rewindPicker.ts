/**
 * `/rewind [target]` in the terminal: without a target, the turns to pick from (prompt and changed
 * files); when files were changed by someone else since that point, whether to overwrite or keep
 * them. The session then gets `/rewind <target> [--force]` as its input.
 *
 * @example
 * ```ts
 * await pickRewind(host, "/rewind", rewinder) // asks, then host.send("/rewind turn:2")
 * ```
 */
import { Rewind } from "@musekit/core"
import { escapeUnsafe, type Style } from "../ansi.js"
import { describeTurns } from "../rewind.js"
import type { MenuChoice } from "./menu.js"

/** The session's turns, and the files someone else changed since a point (or why it cannot go there). */
export interface Rewinder {
  readonly turns: () => Promise<ReadonlyArray<Rewind.Turn>>
  readonly changed: (spec: string) => Promise<{ readonly files: ReadonlyArray<string> } | { readonly error: string }>
}

export interface PickerHost {
  readonly style: Style
  print(lines: ReadonlyArray<string>): void
  /** Ask a question of muse itself; `undefined` when the person cancels it. */
  ask(
    lines: ReadonlyArray<string>,
    prompt: string,
    choices: ReadonlyArray<MenuChoice>,
    inline: boolean
  ): Promise<string | undefined>
  /** Keys wait while the picker works. */
  busy(): void
  /** Back to the prompt of the same input wait. */
  backToIdle(): void
  /** The session's input. */
  send(text: string): void
}

export const pickRewind = async (host: PickerHost, typed: string, rewinder: Rewinder): Promise<void> => {
  const s = host.style
  host.busy()
  host.print([s.cyan(`› ${escapeUnsafe(typed, s)}`)])
  const cancelled = () => {
    host.print([s.dim("  not rewound"), ""])
    host.backToIdle()
  }
  const request = Rewind.parseInput(typed) ?? { spec: "last", force: false }
  let spec = request.spec
  let force = request.force
  if (/^\/rewind\s*$/.test(typed)) {
    const turns = await rewinder.turns()
    if (turns.length === 0) {
      host.print([s.yellow("nothing to rewind: no turn has started yet"), ""])
      host.backToIdle()
      return
    }
    const picked = await host.ask(
      [
        "rewind to just before a turn: its files back as they were then, and the conversation from there",
        ...describeTurns(turns).map((l, i) => `  ${s.bold(`[${turns[i]!.n}]`)} ${escapeUnsafe(l, s)}`)
      ],
      "which turn?",
      turns.map((t) => ({ key: String(t.n), label: `turn ${t.n}`, value: `turn:${t.n}` })),
      false
    )
    if (picked === undefined) return cancelled()
    spec = picked
  }
  if (!force) {
    const check = await rewinder.changed(spec)
    if ("error" in check) {
      host.print([s.yellow(`rewind: ${escapeUnsafe(check.error, s)}`), ""])
      host.backToIdle()
      return
    }
    if (check.files.length > 0) {
      const answer = await host.ask(
        [
          `${s.yellow("?")} changed since the session last wrote ${check.files.length === 1 ? "it" : "them"}, by someone else:`,
          ...check.files.map((f) => `    ${s.bold(escapeUnsafe(f, s))}`),
          s.dim("  overwrite: what they hold now stays in the log, so /rewind undo brings it back")
        ],
        "overwrite or keep?",
        [
          { key: "k", label: "keep them (rewind the rest)", value: "keep" },
          { key: "o", label: "overwrite them", value: "overwrite" }
        ],
        true
      )
      if (answer === undefined) return cancelled()
      force = answer === "overwrite"
    }
  }
  const text = `/rewind ${spec}${force ? " --force" : ""}`
  host.print([s.bold(s.cyan(`› ${escapeUnsafe(text, s)}`)), ""])
  host.send(text)
}
