/**
 * muse's own slash commands, registered like any other (see `commands.ts`): the crew, approvals,
 * the sandbox, the session, the model, MCP servers, rewind, help, clear and exit.
 *
 * @example
 * ```ts
 * for (const c of builtinCommands(host)) registry.register(c)
 * ```
 */
import { Sandbox } from "@musekit/node"
import type { Style } from "../ansi.js"
import type { SlashCommand } from "./commands.js"

export const MODES = ["read-only", "ask", "auto-edit", "auto"] as const

/** What muse's commands use of the screen and the session. */
export interface BuiltinHost {
  readonly style: Style
  print(lines: ReadonlyArray<string>): void
  helpLines(): Array<string>
  crewLines(): Array<string>
  modelLines(): Array<string>
  statusLines(): Array<string>
  mcpLines(): Array<string>
  approvalMode: string
  sandboxMode: Sandbox.Mode
  clearScreen(): void
  leave(): void
  /** Start `/rewind` here; false when this session cannot (the line then goes to the session). */
  rewind(typed: string): boolean
}

export const builtinCommands = (host: BuiltinHost): ReadonlyArray<SlashCommand> => {
  const s = host.style
  const show =
    (lines: () => ReadonlyArray<string>): SlashCommand["run"] =>
    ({ shown }) => {
      host.print([s.cyan(`› ${shown}`), ...lines(), ""])
      return "done"
    }
  return [
    {
      name: "agents",
      description: "the crew: members, status, current task",
      source: "muse",
      run: show(() => host.crewLines())
    },
    {
      name: "approve",
      description: "set the approval mode: /approve read-only|ask|auto-edit|auto",
      source: "muse",
      complete: (arg) => MODES.filter((m) => m.startsWith(arg)),
      run: ({ arg, shown }) => {
        if (!(MODES as ReadonlyArray<string>).includes(arg)) {
          host.print([
            s.cyan(`› ${shown}`),
            s.yellow(`usage: /approve ${MODES.join("|")} (now: ${host.approvalMode})`),
            ""
          ])
          return "done"
        }
        host.approvalMode = arg
        return "send"
      }
    },
    {
      name: "sandbox",
      description: "the OS sandbox of shell commands: /sandbox workspace-write|read-only|off",
      source: "muse",
      complete: (arg) => Sandbox.modes.filter((m) => m.startsWith(arg)),
      run: ({ arg, shown }) => {
        if (arg === "") {
          host.print([s.cyan(`› ${shown}`), ...host.statusLines(), ""])
          return "done"
        }
        if (!(Sandbox.modes as ReadonlyArray<string>).includes(arg)) {
          host.print([
            s.cyan(`› ${shown}`),
            s.yellow(`usage: /sandbox ${Sandbox.modes.join("|")} (now: ${host.sandboxMode})`),
            ""
          ])
          return "done"
        }
        host.sandboxMode = arg as Sandbox.Mode
        return "send"
      }
    },
    {
      name: "status",
      description: "the session: model, approvals, sandbox (and why there is none)",
      source: "muse",
      run: show(() => host.statusLines())
    },
    {
      name: "model",
      description: "the model, its window and price, tokens and cost so far",
      source: "muse",
      run: show(() => host.modelLines())
    },
    {
      name: "mcp",
      description: "the session's MCP servers: status and tools",
      source: "muse",
      run: show(() => host.mcpLines())
    },
    {
      name: "rewind",
      description: "files and conversation back to before a turn (a list to pick from): /rewind [turn:n|seq|last|undo]",
      source: "muse",
      run: ({ typed }) => (host.rewind(typed) ? "done" : "send")
    },
    { name: "help", description: "this help", source: "muse", run: show(() => host.helpLines()) },
    {
      name: "clear",
      description: "clear the screen",
      source: "muse",
      run: () => {
        host.clearScreen()
        return "done"
      }
    },
    {
      name: "exit",
      description: "leave (the session is saved; muse resume continues it)",
      aliases: ["quit"],
      source: "muse",
      run: () => {
        host.leave()
        return "done"
      }
    }
  ]
}
