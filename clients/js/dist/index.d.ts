/**
 * @chainkeys/signers: cosmjs, eosjs and bitcoinjs-lib signers backed by a
 * chainkeys service. This entry point imports no other package when it is
 * loaded (each adapter loads, when it first signs, the peers it checks the
 * service's answers with); the WharfKit plugin is at `@chainkeys/signers/wharfkit`.
 */
export { ChainkeysError, ApprovalPending } from "./errors.js";
export type { Approval, ApprovalState, WaitOptions } from "./errors.js";
export { ChainkeysClient, challengeBytes } from "./client.js";
export type { ChainkeysOptions, SignBatchItem, SignBatchResult, VoteProof } from "./client.js";
export { ChainkeysCosmosMultisig, ChainkeysCosmosSigner } from "./cosmjs.js";
export type { DirectSignDoc } from "./cosmjs.js";
export { ChainkeysSignatureProvider } from "./eosjs.js";
export { signPsbt, coinOf } from "./bitcoinjs.js";
export { verifyApproval } from "./verify.js";
export type { ApprovalCheck } from "./verify.js";
export type { SignPsbtOptions, UtxoCoin, EccVerifier } from "./bitcoinjs.js";
