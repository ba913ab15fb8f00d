/**
 * The question asked once, before a session starts, whether the folder's own settings may take
 * effect. It lists what they set (escaped); the default is no; keys typed before it was drawn do
 * not answer it.
 *
 * @example
 * ```ts
 * const answer = await askTrust(process.stdout, style, { project, status }, (h) => keys.push(h))
 * // "trust" | "once" | "no" | "quit"
 * ```
 */
import { escapeUnsafe, type Style } from "../ansi.js"
import * as Trust from "../trust.js"
import type { Key } from "./editor.js"
import { Gate } from "./gate.js"
import { Screen } from "./screen.js"

export type KeyHandler = (str: string | undefined, key: Key) => void

export type TrustAnswer = "trust" | "once" | "no" | "quit"

/**
 * Ask once, before the session starts, whether the folder's own settings may take effect. The
 * question lists what they set (escaped); the default is no; keys typed before it was drawn do
 * not answer it.
 */
export const askTrust = (
  out: NodeJS.WriteStream,
  style: Style,
  decision: { readonly project: Trust.Project; readonly status: Trust.Status },
  listen: (handler: KeyHandler) => void
): Promise<TrustAnswer> =>
  new Promise((resolve) => {
    const s = style
    const screen = new Screen(out, s)
    const status = decision.status
    screen.print([
      status._tag === "changed"
        ? `${s.yellow("?")} ${s.bold("This folder's own settings changed since you trusted it")} (${escapeUnsafe(status.changed.join(", "), s)}). Trust them again?`
        : `${s.yellow("?")} ${s.bold("Trust this folder?")} ${escapeUnsafe(decision.project.root, s)}`,
      s.dim("  If you trust it, its own files take effect:"),
      ...Trust.describe(decision.project, s),
      s.dim("  They can let the agent do more than your own settings do, such as run commands without asking."),
      ...(status._tag === "untrusted" && status.problem ? [s.yellow(`  ! ${escapeUnsafe(status.problem, s)}`)] : [])
    ])
    const choices: ReadonlyArray<readonly [string, string, TrustAnswer]> = [
      ["y", "yes, trust it", "trust"],
      ["o", "only this session", "once"],
      ["n", "no, my own settings only", "no"]
    ]
    let selected = 2
    const gate = new Gate(() => draw())
    const draw = () => {
      if (!gate.armed) {
        screen.setFooter([`${s.yellow("?")} ${s.dim("read the question above; the answer keys work in a moment")}`])
        return
      }
      const opts = choices.map(([k, label], i) => (i === selected ? s.inverse(`[${k}] ${label}`) : `[${k}] ${label}`))
      screen.setFooter([
        `${s.yellow("?")} ${opts.join("  ")}`,
        s.dim(
          gate.dropped > 0
            ? `${gate.dropped} key${gate.dropped === 1 ? "" : "s"} typed before the question ignored`
            : "←/→ enter, or a letter · trusted folders are kept in ~/.config/muse/trusted.json"
        )
      ])
    }
    let pasting = false
    const done = (answer: TrustAnswer) => {
      gate.dispose()
      screen.setFooter([])
      const said =
        answer === "trust"
          ? s.green("  ⎿ trusted (muse asks again when these files change; undo: muse trust --revoke)")
          : answer === "once"
            ? s.green("  ⎿ trusted for this session")
            : answer === "no"
              ? s.dim("  ⎿ not trusted: this session uses your own settings only")
              : s.dim("  ⎿ cancelled")
      screen.print([said, ""])
      resolve(answer)
    }
    listen((str, key) => {
      if (key.name === "paste-start" || key.name === "paste-end") {
        pasting = key.name === "paste-start"
        return
      }
      if (key.ctrl && (key.name === "c" || key.name === "d")) return done("quit")
      if (pasting || !gate.take()) return draw()
      if (key.name === "left") selected = (selected + choices.length - 1) % choices.length
      else if (key.name === "right" || key.name === "tab") selected = (selected + 1) % choices.length
      else if (key.name === "return" || key.name === "enter") return done(choices[selected]![2])
      else if (str) {
        const c = choices.find(([k]) => k === str.toLowerCase())
        if (c) return done(c[2])
      }
      draw()
    })
    gate.arm()
    draw()
  })
