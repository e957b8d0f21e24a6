/** A cosmjs `OfflineDirectSigner` and `OfflineAminoSigner` backed by chainkeys. */
import type { AccountData, OfflineDirectSigner, DirectSignResponse } from "@cosmjs/proto-signing";
import type { OfflineAminoSigner, AminoSignResponse, MultisigThresholdPubkey, StdSignDoc, StdSignature } from "@cosmjs/amino";
import { ChainkeysClient, type ChainkeysOptions } from "./client.js";
/** cosmjs' `SignDoc` (from cosmjs-types), as `signDirect` takes it. */
export type DirectSignDoc = Parameters<OfflineDirectSigner["signDirect"]>[1];
/**
 * Signs for one Cosmos account held by chainkeys (`options.account` is its
 * address). Use it wherever cosmjs takes a signer:
 * `SigningStargateClient.connectWithSigner(rpc, new ChainkeysCosmosSigner(opts))`.
 *
 * Every answer is checked (`ChainkeysError` `answer_mismatch` otherwise): the
 * account's public key must hash to its address; a signature must carry that
 * key, be 64 bytes r‖s with a low S, and verify over the sha256 of the bytes
 * sent to be signed; the `signed` document must be the one sent. The checks
 * import `@cosmjs/crypto`, `@cosmjs/amino` and (direct) `@cosmjs/proto-signing`.
 */
export declare class ChainkeysCosmosSigner implements OfflineDirectSigner, OfflineAminoSigner {
    #private;
    readonly client: ChainkeysClient;
    constructor(options: ChainkeysOptions);
    /** The account, with its public key as the service reports it (`GET /cosmos/{address}`). */
    getAccounts(): Promise<readonly AccountData[]>;
    /** `POST /cosmos/{address}/sign-direct`: SIGN_MODE_DIRECT. */
    signDirect(signerAddress: string, signDoc: DirectSignDoc): Promise<DirectSignResponse>;
    /** `POST /cosmos/{address}/sign-amino`: SIGN_MODE_LEGACY_AMINO_JSON. */
    signAmino(signerAddress: string, signDoc: StdSignDoc): Promise<AminoSignResponse>;
    /**
     * Keplr's `signArbitrary` (ADR-036): signs `data` (text as UTF-8, or bytes)
     * wrapped in a `sign/MsgSignData` document. `chainId` is not part of an
     * ADR-036 document (Keplr uses it to pick the key); it is accepted for the
     * same call shape.
     */
    signArbitrary(chainId: string, signer: string, data: string | Uint8Array): Promise<StdSignature>;
}
/**
 * chainkeys as one member (or several) of a Cosmos multisig (`options.account` is the
 * multisig's address; docs/multisig.md). The coordinator collects the members'
 * amino signatures over one `StdSignDoc` and has chainkeys assemble the transaction:
 *
 *   const ms = new ChainkeysCosmosMultisig(opts);
 *   const ours = await ms.signAmino(doc);                  // the members held there
 *   const theirs = (await wallet.signAmino(me, doc)).signature;
 *   const { signedTx } = await ms.combine(doc, [...ours, theirs]);
 *
 * Answers are checked as `ChainkeysCosmosSigner`'s: the threshold key must hash to
 * the address, every signature must be by one of its members and verify over the
 * document sent; a combined transaction must carry that key, only signatures that
 * were given, and the document's messages and memo.
 */
export declare class ChainkeysCosmosMultisig {
    readonly client: ChainkeysClient;
    constructor(options: ChainkeysOptions);
    /** `GET /cosmos/{address}/multisig`: the threshold key, checked against the address. */
    pubkey(): Promise<MultisigThresholdPubkey>;
    /** `POST /cosmos/{address}/sign-amino`: every held member's signature over `signDoc`. */
    signAmino(signDoc: StdSignDoc): Promise<StdSignature[]>;
    /** `POST /cosmos/{address}/combine`: the TxRaw of `signDoc` with these members' signatures. */
    combine(signDoc: StdSignDoc, signatures: readonly StdSignature[]): Promise<{
        signedTx: Uint8Array;
        txHash: string;
    }>;
}
