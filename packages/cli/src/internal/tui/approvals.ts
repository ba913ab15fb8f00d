/**
 * Approval questions: what a tool call would do, shown exactly (the whole command, every line of
 * it; the whole diff; all of it escaped), the answers it allows, and the keys that answer it.
 * What does not fit in 40 lines is folded behind [v], and only "no" is possible until it has
 * been shown. "Yes, this session" and "yes, always" first show the rule they would store.
 *
 * @example
 * ```ts
 * const question = new ApprovalPrompt(host)
 * question.ask(request, (answer) => resume(answer))   // drawn; keys go to question.key(str, key)
 * ```
 */
import { Approvals } from "@musekit/core"
import { escapeUnsafe, type Style, stringifySafe } from "../ansi.js"
import * as Render from "../render.js"
import type { Editor, Key } from "./editor.js"
import type { Gate } from "./gate.js"
import type { Cursor, Screen } from "./screen.js"

export interface Choice {
  readonly key: string
  readonly label: string
  readonly answer?: Approvals.Answer | undefined
  /** Ask for a text first; the answer is made from it. */
  readonly withText?: { readonly prompt: string; readonly answer: (text: string) => Approvals.Answer } | undefined
  /** Show the lines of the question that are still folded. */
  readonly expand?: boolean | undefined
  /** Show the rule this answer would store and ask to confirm it. */
  readonly confirm?: "session" | "project" | undefined
  /** Back from a confirmation to the choices. */
  readonly back?: boolean | undefined
}

/** Lines of a question shown before the rest is folded behind [v]. */
export const FOLD_LINES = 40

export interface State {
  readonly _tag: "approval"
  readonly request: Approvals.Request
  choices: ReadonlyArray<Choice>
  selected: number
  text: { readonly prompt: string; readonly answer: (text: string) => Approvals.Answer } | undefined
  /** Lines of the question not shown yet; no answer but "no" is possible until [v] shows them. */
  hidden: ReadonlyArray<string>
  readonly resolve: (a: Approvals.Answer) => void
}

const noChoices: ReadonlyArray<Choice> = [
  { key: "n", label: "no", answer: { allow: false, scope: "once", reason: "the user said no" } },
  {
    key: "t",
    label: "no, tell why…",
    withText: { prompt: "tell the agent › ", answer: (t) => ({ allow: false, scope: "once", reason: t }) }
  }
]

/**
 * The answers to a question. While part of it is folded, only "show all" and the noes. "Yes, this
 * session" and "yes, always" are offered only with a rule to store (`request.proposal`), and
 * "always" only where a saved rule takes effect again (a folder with trusted settings, or none).
 */
export const toolChoices = (request: Approvals.Request, hidden: number, alwaysOk: boolean): ReadonlyArray<Choice> =>
  request.unsandboxed && hidden === 0
    ? [
        // the only yes is the explicit one: outside the sandbox, this once
        {
          key: "u",
          label: "run unsandboxed",
          answer: { allow: true, scope: "once", unsandboxed: true }
        },
        ...noChoices
      ]
    : hidden > 0
      ? [
          { key: "v", label: `show all (${hidden} more lines)`, expand: true },
          ...(request.tool === "/plan"
            ? [{ key: "n", label: "drop it", answer: { allow: false, scope: "once" } } satisfies Choice]
            : noChoices)
        ]
      : request.tool === "/plan"
        ? [
            { key: "y", label: "approve", answer: { allow: true, scope: "once" } },
            {
              key: "e",
              label: "edit…",
              withText: {
                prompt: "what to change › ",
                answer: (t) => ({ allow: false, scope: "once", reason: `edit: ${t}` })
              }
            },
            {
              key: "r",
              label: "reject…",
              withText: { prompt: "why › ", answer: (t) => ({ allow: false, scope: "once", reason: t }) }
            },
            { key: "n", label: "drop it", answer: { allow: false, scope: "once" } }
          ]
        : [
            { key: "y", label: "yes", answer: { allow: true, scope: "once" } },
            ...(request.proposal ? [{ key: "s", label: "yes, this session…", confirm: "session" } as const] : []),
            ...(request.proposal && alwaysOk ? [{ key: "a", label: "yes, always…", confirm: "project" } as const] : []),
            ...noChoices
          ]

/** The question's first line and the lines under it (the command, warnings, the diff or plan). */
export const questionLines = (
  request: Approvals.Request,
  s: Style,
  o: {
    /** The last text a skill printed: a plan shown there is not shown again. */
    readonly lastOutput: string
    /** The question shows the call's diff (the transcript then does not show it again). */
    readonly showsDiff: () => void
  }
): { readonly head: string; readonly body: Array<string> } => {
  const who = `${s.magenta(escapeUnsafe(request.agent, s))} `
  const verb = request.unsandboxed
    ? "run OUTSIDE the sandbox"
    : request.effect === "exec"
      ? "run"
      : request.effect === "write"
        ? "change a file"
        : "use"
  const command = request.summary.replace(/\n$/, "")
  const multiLine = request.tool === "run_shell" && command.includes("\n")
  const head =
    request.tool === "/plan"
      ? `${s.yellow("?")} ${who}approve the plan: ${s.bold(escapeUnsafe(request.summary, s))}`
      : multiLine
        ? `${s.yellow("?")} ${who}wants to run a command of ${command.split("\n").length} lines:`
        : `${s.yellow("?")} ${who}wants to ${verb}: ${s.bold(Render.toolTitle(request.tool, request.summary, s))}`
  const body: Array<string> = []
  if (multiLine) body.push(...Render.commandLines(request.summary, s).map((l) => `  ${s.bold(l)}`))
  // why it asks although a rule or the mode might let it run (a protected path, what no rule covers)
  for (const w of request.warnings ?? []) body.push(`  ${s.yellow("!")} ${escapeUnsafe(w, s)}`)
  const planAbove = request.tool === "/plan" && request.preview !== undefined && o.lastOutput.endsWith(request.preview)
  if (planAbove) body.push(s.dim("  (the plan above)"))
  else if (request.preview) {
    if (request.tool !== "/plan") o.showsDiff()
    body.push(
      ...(request.tool === "/plan"
        ? request.preview.split("\n").map((l) => `  ${escapeUnsafe(l, s, { tabs: "spaces" })}`)
        : Render.diffLines(request.preview, s, Number.POSITIVE_INFINITY).map((l) => `  ${l}`))
    )
  }
  return { head, body }
}

/** What a question needs of the screen it is asked on. */
export interface Host {
  readonly style: Style
  readonly screen: Screen
  readonly editor: Editor
  readonly gate: Gate
  readonly alwaysOk: boolean
  statusLine(): string
  draw(): void
  /** The question is answered: back to work. */
  answered(): void
}

export class ApprovalPrompt {
  constructor(private readonly host: Host) {}

  /** A new question, drawn; its state for the UI. */
  open(
    request: Approvals.Request,
    lines: { readonly head: string; readonly body: ReadonlyArray<string> },
    resolve: (a: Approvals.Answer) => void
  ): State {
    const s = this.host.style
    const hidden = lines.body.length > FOLD_LINES ? lines.body.slice(FOLD_LINES) : []
    this.host.screen.print([
      lines.head,
      ...lines.body.slice(0, FOLD_LINES),
      ...(hidden.length > 0
        ? [s.yellow(`  … ${hidden.length} more lines: [v] shows them (answering yes needs them seen)`)]
        : [])
    ])
    return {
      _tag: "approval",
      request,
      choices: toolChoices(request, hidden.length, this.host.alwaysOk),
      selected: 0,
      text: undefined,
      hidden,
      resolve
    }
  }

  /** The footer lines (and where the cursor goes when a text is typed). */
  footer(st: State, lines: Array<string>): Cursor | undefined {
    const s = this.host.style
    if (st.text) {
      const v = this.host.editor.view(st.text.prompt.length, this.host.screen.lineWidth)
      lines.push(s.yellow(st.text.prompt) + v.text)
      lines.push(this.host.statusLine())
      return { row: lines.length - 2, col: v.col }
    }
    if (!this.host.gate.armed) {
      lines.push(`${s.yellow("?")} ${s.dim("read the question above; the answer keys work in a moment")}`)
      lines.push(this.host.statusLine())
      return undefined
    }
    const opts = st.choices
      .map((c, i) => {
        const text = `[${c.key}] ${c.label}`
        return i === st.selected ? s.inverse(text) : text
      })
      .join("  ")
    lines.push(`${s.yellow("?")} ${opts}`)
    const dropped = this.host.gate.dropped
    lines.push(
      this.host.statusLine() +
        s.dim(
          dropped > 0
            ? ` · ${dropped} key${dropped === 1 ? "" : "s"} typed before the question ignored`
            : " · ←/→ enter, or a letter"
        )
    )
    return undefined
  }

  /** Show the rule a "this session" / "always" answer would store, and ask to confirm it. */
  private confirmRule(st: State, scope: "session" | "project"): void {
    if (!st.request.proposal) return
    const s = this.host.style
    const rule: Approvals.Rule = { ...st.request.proposal, scope }
    const answer: Approvals.Answer = { allow: true, scope, rule }
    this.host.screen.print([
      `  ${s.yellow("?")} ${
        scope === "session"
          ? "for the rest of this session, run without asking every call this rule matches:"
          : "from now on, run without asking every call this rule matches (saved in .muse/permissions.json):"
      }`,
      `    ${s.bold(escapeUnsafe(Approvals.describeRule(rule), s))}`,
      `    ${s.dim("stored as")} ${escapeUnsafe(stringifySafe(rule), s)}`
    ])
    st.choices = [
      { key: "y", label: "yes, store this rule and run it", answer },
      { key: "n", label: "no, back to the question", back: true }
    ]
    st.selected = 1
    this.host.gate.arm()
    this.host.draw()
  }

  private answer(st: State, a: Approvals.Answer): void {
    this.host.answered()
    st.resolve(a)
  }

  /** A key while the question is open (`pasting`: it came in a bracketed paste). */
  key(st: State, str: string | undefined, key: Key, pasting: boolean): void {
    const host = this.host
    if (st.text) {
      if (key.name === "escape") {
        st.text = undefined
        host.editor.clear()
        host.draw()
        return
      }
      const r = host.editor.key(str, key)
      if (r._tag === "submit") {
        const t = r.text.trim()
        const make = st.text.answer
        st.text = undefined
        if (t === "") {
          host.draw()
          return
        }
        this.answer(st, make(t))
        return
      }
      host.draw()
      return
    }
    // a paste, or a key that came before the question could be read, never answers it
    if (pasting) {
      host.gate.dropped++
      host.draw()
      return
    }
    if (!host.gate.take()) {
      host.draw()
      return
    }
    const pick = (c: Choice) => {
      if (c.withText) {
        st.text = c.withText
        host.editor.clear()
        return host.draw()
      }
      if (c.expand) {
        const rest = st.hidden
        st.hidden = []
        host.screen.print(rest)
        st.choices = toolChoices(st.request, 0, host.alwaysOk)
        st.selected = 0
        host.gate.arm()
        return host.draw()
      }
      if (c.confirm) return this.confirmRule(st, c.confirm)
      if (c.back) {
        st.choices = toolChoices(st.request, 0, host.alwaysOk)
        st.selected = 0
        host.gate.arm()
        return host.draw()
      }
      if (c.answer) this.answer(st, c.answer)
    }
    const back = st.choices.find((c) => c.back)
    if (key.name === "escape" && back) {
      pick(back)
      return
    }
    if (key.name === "left") st.selected = (st.selected + st.choices.length - 1) % st.choices.length
    else if (key.name === "right" || key.name === "tab") st.selected = (st.selected + 1) % st.choices.length
    else if (key.name === "return" || key.name === "enter") {
      pick(st.choices[st.selected]!)
      return
    } else if (str) {
      const c = st.choices.find((x) => x.key === str.toLowerCase())
      if (c) {
        pick(c)
        return
      }
    }
    host.draw()
  }
}
